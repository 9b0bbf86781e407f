"""The test functions of other Python AD systems, ported for `test_ad_peers.py`: google/tangent's
`tests/functions.py` (kept as written, bar its own stack API) and the functions of HIPS/autograd's
`tests/test_numpy.py`, `test_scalar_ops.py`, `test_graphs.py`, `test_builtins.py`, `test_systematic.py` and
`test_linalg.py` (`autograd.numpy` is plain `numpy`, `autograd.grad` is `ad.grad`), with the arguments each
is checked at, and the calls of NumPy functions tensorlang.ad refuses."""
import itertools
import linecache
import operator

import numpy as np

from tensorlang import ad


# ================================================================================================
# google/tangent tests/functions.py. tangent's conftest calls each function by the names of its
# parameters: a, b, c are scalars, n an int, x a vector, sqm a square matrix (TANGENT_ARGS below).
# Left out: the TensorFlow functions (tfe_*, traced), cart2polar (np.arctan(b, a) writes into a, and
# raises for floats) and inlining_contextmanager (tangent's insert_grad_of). tangent.Stack with
# tangent.push/pop is a list with append/pop.
# ================================================================================================
def id_(a):
    return a


def unary_sub(a):
    return -a


def sum_(x):
    return np.sum(x)


def cast_sum_(x):
    return np.sum(np.array(x))


def overwrite_call(x):
    x = np.sum(x)
    x = x * x
    return x


def tanh(a):
    return np.tanh(a)


def identity_assign(a):
    b = a
    return b


def increment(a):
    return a + 1


def saxpy(a, b, c):
    return a * b + c


def mul(a, b):
    return a * b


def add(a, b):
    return a + b


def saxpy_call(a, b, c):
    return add(mul(a, b), c)


def saxpy_anf(a, b, c):
    t1 = a * b
    t2 = t1 + c
    return t2


def saxpy_overwrite(a, b, c):
    t = a * b
    t = t + c
    return t


def gradname_aliasing(a):
    da = a * a
    return da


def overwrite_if(a):
    if a > 0:
        a = a * 3.0
    else:
        a = a * 2.0
    return a


def test_binop_mul1(a):
    return a * 3.0


def test_binop_mul2(a):
    return 3.0 * a


def test_binop_mul3(a):
    return a * a


def test_binop_div1(a):
    return a / 3.0


def test_binop_div2(a):
    return 3.0 / a


def test_binop_div3(a):
    return a / a


def test_binop_sub1(a):
    return a - 3.0


def test_binop_sub2(a):
    return 3.0 - a


def test_binop_sub3(a):
    return a - a


def test_binop_add1(a):
    return a + 3.0


def test_binop_add2(a):
    return 3.0 + a


def test_binop_add3(a):
    return a + a


def nested_if(a):
    if a > 0:
        if a < 10:
            a = a * a
    else:
        a = 3.0 * a
    return a


def multiarg_if(a):
    # A bunch of spammy nonsense to try to break our system
    if a * a / 3.0 > 0:
        b = 3.0
    else:
        b = 4.0
    a = a * b
    if a < b - a * b:
        a = a * a
    elif a > b + 3.0 * a:
        if a / 2.0 < 0:
            a = a / b
        else:
            a = a * b
    else:
        a = -a
    return a


def fn_multiply(a):
    return np.multiply(a, 3.0)


def fn_multiple_return(a):
    return 2 * a, a


def test_anf_list(a):
    b = [1, a * a, 2]
    return np.sum(b)


def test_deep_anf_list(x):
    b = [1, x[0] * x[1] * x[2], 3]
    return np.sum(b)

    # TODO: needs equivalent for all iterable collections


def test_subscript1(x):
    a = x[0]
    b = x[1]
    return a * b


def test_subscript2(x):
    a = x[0]
    b = x[1]
    x[0] = a * b
    return np.sum(x)


def test_subscript3(x):
    y = x ** 2.0
    x[0] = y[1] * y[2]
    return np.sum(x * y)


def test_list_and_subscript(a):
    x = [1.0, a, 3.0]
    return x[0] * x[1]

def test_implicit_indexing(x):
    res = 0.0
    for a in x:
        res += a
    return res

# TODO: needs a numpy equivalent, and all iterables collections too
# def test_subscript_overwrite(a):
#     x = [1,a*a,3]
#     x[1] = x[0]*x[1]
#     return x[1]+x[1]


def serial_if(a):
    if a > 0:
        a = a * a
    a = a + a
    if a < 0:
        a = 3.0 * a
    return a


def multivar_if(a, b):
    if a > b:
        a = a * a
    else:
        a = a * b
    return a

# TODO: split this into a bunch of tinier tests


def serial_for(a, n):
    for i in range(n):
        a = a * a
    a = 2.0 * a
    for i in range(n + 1):
        a = a * 3.0
    return a


def serial_ifthenfor(a, n):
    if a > 0:
        a = a * a
    a = 2.0 * a
    for i in range(n):
        a = a * a
    return a


def serial_forthenif(a, n):
    for i in range(n):
        a = a * a
    a = 2.0 * a
    if a > 0:
        a = a * a
    return a


def devilish_nested_if(a):
    if a > 0:
        a = a * 3.0
        if a < 10:
            a = a * a
        else:
            a = a * 2.0
    return a


def overwrite_ifelse(a):
    if a > 0:
        a = a * 3.0
    elif 0 > a:
        a = a * 2.0
    else:
        a = 1.0 * a
    return a


def overwrite_arg(a):
    a = a * 3.0
    return a


def overwrite_non_arg(a):
    b = a
    b = b * 3.0
    return b


def third_pow(a):
    return a * a * a


def direct_third_pow(a):
    return a ** 3


def iter_third_pow1(a):
    out = 1
    for i in range(3):
        out = out * a
    return out


def iter_third_pow2(a):
    out = a
    for i in range(3 - 1):
        out = out * a
    return out


def iterpower_static(a):
    for i in range(3):
        a = a * a
    return a


def iterpower(a, n):
    for i in range(n):
        a = a * a
    return a


def cond_iterpower1(a):
    for i in range(3):
        if a < 20:
            a = a * a
    return a


def cond_iterpower2(a):
    if a < 20:
        for i in range(3):
            a = a * a
    return a


def superfor_iterpower(a):
    for i in range(2):
        for j in range(3):
            a = a * a
    return a


def super_iterpower(a):
    # Tests ANF in a for loop
    for i in range(3):
        a = a * a * a
    return a

# ================================================
# Numpy grads
# ================================================


def numpy_sum(x):
    return np.sum(x)


def numpy_mean(x):
    return np.mean(x)


def numpy_exp(a):
    return np.exp(a)


def numpy_exp2(a):
    return np.exp(np.exp(a))


def numpy_sqrt(a):
    if a >= 0:
        r = np.sqrt(a)
    else:
        r = np.sqrt(-a)
    return r


def numpy_cos(a):
    return np.cos(a)


def numpy_sin(a):
    return np.sin(a)


def numpy_tan(a):
    return np.tan(a)


def numpy_cosh(a):
    return np.cosh(a)


def numpy_sinh(a):
    return np.sinh(a)


def numpy_tanh(a):
    return np.tanh(a)


def numpy_arccos(a):
    return np.arccos(a)


def numpy_arcsin(a):
    return np.arcsin(a)


def numpy_arctan(a):
    return np.arctan(a)


def numpy_atleast_1d(x):
    return np.sum(np.atleast_1d(x))


def numpy_atleast_2d(x):
    return np.sum(np.atleast_2d(x))


def numpy_atleast_3d(x):
    return np.sum(np.atleast_3d(x))


# Label is 0 or 1


def logistic_regression(input, label, W, b):
    h1 = np.dot(input, W) + b
    prediction = 0.5 * (np.tanh(h1) + 1)
    label_probabilities = prediction * label + (1 - prediction) * (1 - label)
    loss = -np.sum(np.log(label_probabilities))
    return loss


def det(sqm):
    return np.linalg.det(sqm)


# ================================================
# Function calls
# ================================================


def _inner_fn(a, b):
    return a * b


def mul_with_call(a, b):
    return _inner_fn(a, b)


def if_mul_with_call(a, b):
    if a > b:
        o = _inner_fn(a, b)
    else:
        o = _inner_fn(b, a)
    return o


def iterpower_with_call(a, n):
    for i in range(n):
        a = _inner_fn(a, a)
    return a


def nested_call(a, b):
    return mul_with_call(a, b)


def iterpower_with_nested_def(a, n):
    def _fn(a, n):
        return a * n

    for i in range(n):
        a = _fn(a, a)
    return a


# ================================================
# Subscripts
# ================================================


def unpacking_args_saxpy(abc_packed_in_tuple):
    a, b, c = abc_packed_in_tuple
    return a * b + c


def dict_saxpy(val):
    return val['a'] * val['b'] + val['c']


def dict_wrapper(abc_packed_in_tuple):
    a, b, c = abc_packed_in_tuple
    return dict_saxpy(dict(a=a, b=b, c=c))


def passthru_pack(a, b, c, i):
    x = a, b, c
    return x[i]


def passthru_unpack(abc_packed_in_tuple):
    a, b, c = abc_packed_in_tuple
    return a

# ================================================
# Misc
# ================================================


def listcomp(a):
    return np.sum([i * 3 for i in a])


def while_big(a):
    while np.abs(a) > 0.1:
        a = a * 0.5
    return a


def active_subscript(x):
    y = np.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i]
    return np.sum(y)


def init_array_grad_maybe_active(x):
    h = np.zeros((len(x), 3))
    for t in range(len(h)):
        h[t] = x[t]
    return np.sum(h)


def slicing(x):
    return np.sum(x[1:])


def rnn(inputs, W):
    h = np.zeros((4, 3))
    for t in range(3):
        h[t + 1] = np.dot(inputs[t], W) + h[t]
    return np.sum(h[1:])


def augassign(a):
    x = a * a
    x *= x
    return x


def bilinear(x, h, U, W, b):
    y = np.dot(x, W)
    y = y + np.dot(h, U)
    y = y + b
    y = np.tanh(y)
    return np.sum(y)


# Functions were problematic in the development of grad(grad(f))
# They stress differentiation through stack pushes and pops,
# which can complicate dataflow analysis
def stack_pushing(a):
    stack = []
    y = a * a
    stack.append(a)
    aa = stack.pop()
    z = y * aa
    z = z * aa
    return z


def gradgrad_pow(a, b):
    if a >= 0:
        a = a ** b
    else:
        a = (-a) ** b
    return a


def gradgrad_pow_twice(a):
    a = a * a
    y = a * a
    return y


def gradgrad_chain_of_mults(a):
    b = a  # this line forces overwrite protection
    b = a * a
    c = b * b
    d = c * c
    return d


def gradgrad_chain_of_multcalls(a):
    b = mul(a, a)
    c = mul(b, b)
    d = mul(c, c)
    return d


def useless_stack_ops(a):
    _stack = []
    b = a * a
    _stack.append(b)
    b = _stack.pop()
    return a


def redefining_var_as_list(a):
    # Initialize the tape
    _stack = []
    x = a
    _stack.append(x)
    x = [a]
    x = _stack.pop()
    return a


def nested_dict(p):
    return p['i']['j'] * p['i']['k']


def extended_slice(x):
    return np.sum(x[::2, np.newaxis])


TANGENT = [
    id_, unary_sub, sum_, cast_sum_, overwrite_call, tanh, identity_assign, increment, saxpy, mul, add,
    saxpy_call, saxpy_anf, saxpy_overwrite, gradname_aliasing, overwrite_if, test_binop_mul1,
    test_binop_mul2, test_binop_mul3, test_binop_div1, test_binop_div2, test_binop_div3, test_binop_sub1,
    test_binop_sub2, test_binop_sub3, test_binop_add1, test_binop_add2, test_binop_add3, nested_if,
    multiarg_if, fn_multiply, fn_multiple_return, test_anf_list, test_deep_anf_list, test_subscript1,
    test_subscript2, test_subscript3, test_list_and_subscript, test_implicit_indexing, serial_if,
    multivar_if, serial_for, serial_ifthenfor, serial_forthenif, devilish_nested_if, overwrite_ifelse,
    overwrite_arg, overwrite_non_arg, third_pow, direct_third_pow, iter_third_pow1, iter_third_pow2,
    iterpower_static, iterpower, cond_iterpower1, cond_iterpower2, superfor_iterpower, super_iterpower,
    numpy_sum, numpy_mean, numpy_exp, numpy_exp2, numpy_sqrt, numpy_cos, numpy_sin, numpy_tan, numpy_cosh,
    numpy_sinh, numpy_tanh, numpy_arccos, numpy_arcsin, numpy_arctan, numpy_atleast_1d, numpy_atleast_2d,
    numpy_atleast_3d, logistic_regression, det, mul_with_call, if_mul_with_call, iterpower_with_call,
    nested_call, iterpower_with_nested_def, unpacking_args_saxpy, dict_saxpy, dict_wrapper, passthru_pack,
    passthru_unpack, listcomp, while_big, active_subscript, init_array_grad_maybe_active, slicing, rnn,
    augassign, bilinear, stack_pushing, gradgrad_pow, gradgrad_pow_twice, gradgrad_chain_of_mults,
    gradgrad_chain_of_multcalls, useless_stack_ops, redefining_var_as_list, nested_dict, extended_slice]
_v = np.random.default_rng(0).standard_normal
# tangent's conftest draws a, b, c from -2..2, n from 1..3, x of sizes 3, 5, 10, sqm of 1x1 and 5x5
TANGENT_ARGS = {"a": (-1.5, 0.5, 1.5), "b": (-0.7, 1.3), "c": (0.4,), "n": (1, 2, 3),
                "x": (_v(3), _v(5)), "sqm": (_v((1, 1)), _v((3, 3)))}
# points inside a function's domain where -1.5..1.5 leaves it
TANGENT_DOMAIN = {numpy_arccos: (-0.5, 0.3), numpy_arcsin: (-0.5, 0.3)}
_label = np.zeros(5)
_label[1] = 1
# the functions tangent's tests call with arguments of their own
TANGENT_SPECIAL = {
    logistic_regression: [(np.abs(_v(3)), _label, _v((3, 5)), _v(5))],
    rnn: [(_v((3, 2)), _v((2, 3)))],
    bilinear: [(_v((1, 3)), _v((1, 3)), _v((3, 3)), _v((3, 3)), _v((1, 3)))],
    unpacking_args_saxpy: [((0.5, -1.5, 1.5),)],
    dict_saxpy: [({"a": 0.5, "b": -1.5, "c": 1.5},)],
    dict_wrapper: [((0.5, -1.5, 1.5),)],
    passthru_pack: [(0.5, -1.5, 1.5, 1)],
    passthru_unpack: [((0.5, -1.5, 1.5),)],
    nested_dict: [({"i": {"j": 0.5, "k": -1.5}},)],
    listcomp: [(_v(3),)],
}


# ================================================================================================
# HIPS/autograd tests/test_numpy.py: each test's `fun`, named after its test, with the arguments it
# is checked at (`check_grads(fun)(...)`, here AG_NUMPY). autograd.numpy is plain numpy here.
# ================================================================================================
npr = np.random.RandomState(1)   # numpy.random's API, seeded here
_rng = np.random.default_rng(1)
A_564 = _rng.standard_normal((5, 6, 4))
C_MASK = _rng.standard_normal((4, 5)) > 0
C_32 = _rng.standard_normal((3, 2))
C_10 = _rng.standard_normal(10)
BASE = np.abs(_rng.standard_normal(5)) + 0.5
OFFSET, OFFSET2, OFFSET_EXTRA = 3, -4, 2   # npr.randint(-9, 11) and npr.randint(-5, 6) in the original
INDS = np.ones(5)[:, None]


def ag_dot(x, y):
    return np.dot(x, y)


def ag_outer(x, y):
    return np.outer(x, y)


def ag_max(x):
    return np.max(x)


def ag_max_axis(x):
    return np.max(x, axis=1)


def ag_max_axis_keepdims(x):
    return np.max(x, axis=1, keepdims=True)


def ag_min(x):
    return np.min(x)


def ag_min_axis(x):
    return np.min(x, axis=1)


def ag_min_axis_keepdims(x):
    return np.min(x, axis=1, keepdims=True)


def ag_sum_1(x):
    return np.sum(x)


def ag_sum_2(x):
    return np.sum(x, axis=0)


def ag_sum_3(x):
    return np.sum(x, axis=0, keepdims=True)


def ag_sum_with_axis_tuple(x):
    return np.sum(x, axis=(1, 2))


def ag_plain_sum(a, _r=np.sum):
    return _r(np.exp(a) * BASE)


def ag_plain_prod(a, _r=np.prod):
    return _r(np.exp(a) * BASE)


def ag_plain_max(a, _r=np.max):
    return _r(np.exp(a) * BASE)


def ag_plain_min(a, _r=np.min):
    return _r(np.exp(a) * BASE)


def ag_flipud(x):
    return np.flipud(x)


def ag_fliplr(x):
    return np.fliplr(x)


def ag_rot90(x):
    return np.rot90(x)


def ag_cumsum_axis0(x):
    return np.cumsum(x, axis=0)


def ag_cumsum_axis1(x):
    return np.cumsum(x, axis=1)


def ag_cumsum_1d(x):
    return np.cumsum(x)


def ag_non_numpy_sum(x, y):
    return sum([x, y])


def ag_mean_1(x):
    return np.mean(x)


def ag_mean_2(x):
    return np.mean(x, axis=0)


def ag_mean_3(x):
    return np.mean(x, axis=0, keepdims=True)


ag_mean_list_of_boxes = lambda x: np.mean([x, x + 2])
ag_mean_tuple_of_boxes = lambda x: np.mean((x, x + 2))
ag_std_list_of_boxes = lambda x: np.std([x, x + 2])
ag_std_tuple_of_boxes = lambda x: np.std((x, x + 2))
ag_var_list_of_boxes = lambda x: np.var([x, x + 2])
ag_var_tuple_of_boxes = lambda x: np.var((x, x + 2))


def ag_index_ints(x):
    return x[3, 0, 1]


def ag_index_slice(x):
    return x[::-1, 2:4, :]


def ag_index_lists(x):
    return x[[0, 1, 2], :, :]


def ag_index_mixed(x):
    return x[3, 2:, [1, 3]]


def ag_vector_slice(x):
    return x[2:4]


def ag_index_slice_fanout(x):
    y = x[::-1, 2:4, :]
    z = x[::-1, 3:5, :]
    return y + z


def ag_index_multiple_slices(x):
    y = x[2:6]
    z = y[1:3]
    return z


def ag_reshape_method(x):
    return x.reshape((5 * 4, 6))


def ag_reshape_call(x):
    return np.reshape(x, (5 * 4, 6))


def ag_reshape_method_nolist(x):
    return x.reshape(5 * 4, 6)


def ag_ravel_method(x):
    return x.ravel()


def ag_ravel_call(x):
    return np.ravel(x)


def ag_flatten_method(x):
    return x.flatten()


def ag_simple_append_list_2D(A, B):     # check_grads(np.append, argnum=(0, 1))(A, B, axis=0)
    return np.append(A, B, axis=0)


def ag_simple_concatenate(x):
    return np.concatenate((A_564[:4], x))


def ag_concatenate_axis_0(x):
    return np.concatenate((A_564, x, A_564))


def ag_concatenate_axis_1(x):
    return np.concatenate((A_564, x, A_564), axis=1)


def ag_concatenate_axis_1_unnamed(x):
    return np.concatenate((A_564, x, A_564), 1)


def ag_trace(x):
    return np.trace(x, offset=OFFSET)


def ag_trace2(x):
    return np.trace(x, offset=OFFSET2)


def ag_trace_extradims(x):
    return np.trace(x, offset=OFFSET_EXTRA)


def ag_diag(x):
    return np.diag(x)


def ag_transpose(x):
    return x.T


def ag_roll(x):
    return np.roll(x, 2, axis=1)


def ag_triu(x):
    return np.triu(x, k=2)


def ag_tril(x):
    return np.tril(x, k=2)


def ag_clip(x):
    return np.clip(x, a_min=0.1, a_max=1.1)


def ag_prod_1(x):
    return np.prod(x)


def ag_prod_2(x):
    return np.prod(x, axis=0)


def ag_prod_3(x):
    return np.prod(x, axis=0, keepdims=True)


def ag_1d_array(x):
    return np.array([x, x * 1.0, x + 2.5])


def ag_2d_array(x):
    return np.array([[x, x * 1.0, x + 2.5], [x**2, x, x / 2.0]])


def ag_1d_array_fanout(x):
    A = np.array([x, x * 1.0, x + 2.5])
    return A + A


def ag_2d_array_fanout(x):
    A = np.array([[x, x * 1.0, x + 2.5], [x**2, x, x / 2.0]])
    return A + A


def ag_array_from_scalar(x):
    return np.array(x)


def ag_scalar_array_box_attributes(x):   # called with np.float64(3.0), which has these attributes
    assert x.shape == ()
    assert x.ndim == 0
    assert x.size == 1
    assert x.dtype == np.float64
    return x**2


def ag_array_from_arrays(x):
    return np.array([x, x])


def ag_array_from_arrays_2(x):
    return np.array([[2 * x, x + 1], [x, x]])


def ag_len(x):
    assert len(x) == 3
    return x


def ag_r_basic(x):
    c = npr.randn(3, 2)
    b = np.r_[x]
    return b


def ag_r_double(x):
    c = npr.randn(3, 2)
    b = np.r_[x, x]
    return b


def ag_no_relation(x):
    return C_32


def ag_r_no_relation(x):
    b = np.r_[C_32]
    return b


def ag_r_node_and_const(x):
    b = np.r_[x, C_32]
    return b


def ag_r_mixed(x):
    b = np.r_[x, C_32, x]
    return b


def ag_r_slicing(x):
    b = np.r_[x, C_10, 1:10]
    return b


def ag_c_(x):
    b = np.c_[x, C_32, x]
    return b


def ag_var_ddof(x):           # combo_check(np.var, (0,))(..., axis=[None, 1], keepdims=[True], ddof=[2])
    return np.var(x, axis=1, keepdims=True, ddof=2)


def ag_std_ddof(x):
    return np.std(x, axis=None, keepdims=False, ddof=1)


def ag_where(x, y):
    b = np.where(C_MASK, x, y)
    return b


def ag_squeeze_func(x):
    return np.squeeze(x)


def ag_squeeze_method(x):
    return x.squeeze()


def ag_repeat(x):
    return np.repeat(x, 2, axis=1)


def ag_repeat_axis1_rep1(x):
    return np.repeat(x, 1, axis=1)


def ag_repeat_axis0(x):
    return np.repeat(x, 2, axis=0)


def ag_expand_dims(x):
    return np.expand_dims(x, 2)


def ag_tensordot_kwargs_by_position(x):
    return np.tensordot(x * np.ones((2, 2)), x * np.ones((2, 2)), 2)


ag_multi_index = lambda x: np.sum(x[[0, 0]])
ag_multi_index2 = lambda x: np.sum(x[[0, 1, 0]])


def ag_index_dot_slices(x):
    return np.dot(x[:2], x[2:])


def ag_cast_to_int(W):
    # glue W and inds together
    glued_together = np.concatenate((W, INDS), axis=1)

    # separate W and inds back out
    new_W = W[:, :-1]
    new_inds = np.int64(W[:, -1])

    assert new_inds.dtype == np.int64
    return new_W[new_inds].sum()


def ag_diagonal(D):
    return np.diagonal(D, axis1=-1, axis2=-2)


_NAN_Y = np.array([0.0, np.nan, np.inf, -np.inf])
ag_nan_to_num = lambda x: np.sum(np.sin(np.nan_to_num(x + _NAN_Y)))


def ag_max_equal_values(x):
    return np.max(np.array([x, x]))


def ag_max_equal_values_2d(x):
    return np.max(np.array([[x, x], [x, 0.5]]), axis=1)


def ag_min_3_way_equality(x):
    return np.min(np.array([[x, x, x], [x, 0.5, 0.5], [0.5, 0.5, 0.5], [x, x, 0.5]]), axis=0)


def ag_maximum_equal_values(x):
    return np.maximum(x, x)


def ag_maximum_equal_values_2d(x):
    return np.maximum(np.array([x, x, 0.5]), np.array([[x, 0.5, x], [x, x, 0.5]]))


def ag_linspace(x, y, num=5):
    return np.linspace(x, y, num)


def ag_astype(x):
    return np.sum(np.sin(x.astype("float64")))


def ag_gradient(x):              # check_grads(np.gradient, 0)(npr.randn(10))
    return np.gradient(x)


# ================================================================================================
# HIPS/autograd tests/test_scalar_ops.py: the scalar functions, at the test's points
# (its npr.randn()/npr.rand() draws replaced by fixed numbers in the same ranges).
# ================================================================================================
AG_SCALAR_OPS = [
    ("abs", lambda x: 3.0 * np.abs(x), [(1.1,), (-1.1,)]),
    ("absolute", lambda x: 3.0 * np.absolute(x), [(1.1,), (-1.1,)]),
    ("sin", lambda x: 3.0 * np.sin(x), [(0.37,)]),
    ("sign", lambda x: 3.0 * np.sign(x), [(1.1,), (-1.1,)]),
    ("exp", lambda x: 3.0 * np.exp(x), [(0.37,)]),
    ("log", lambda x: 3.0 * np.log(x), [(0.81,)]),
    ("log2", lambda x: 3.0 * np.log2(x), [(0.81,)]),
    ("log10", lambda x: 3.0 * np.log10(x), [(0.81,)]),
    ("log1p", lambda x: 3.0 * np.log1p(x), [(0.81,)]),
    ("expm1", lambda x: 3.0 * np.expm1(x), [(0.81,)]),
    ("exp2", lambda x: 3.0 * np.exp2(x), [(0.81,)]),
    ("neg", lambda x: 3.0 * -x, [(0.37,)]),
    ("cos", lambda x: 3.0 * np.cos(x), [(0.37,)]),
    ("tan", lambda x: 3.0 * np.tan(x), [(0.37,)]),
    ("cosh", lambda x: 3.0 * np.cosh(x), [(0.37,)]),
    ("sinh", lambda x: 3.0 * np.sinh(x), [(0.37,)]),
    ("tanh", lambda x: 3.0 * np.tanh(x), [(0.37,)]),
    ("arccos", lambda x: 3.0 * np.arccos(x), [(0.1,)]),
    ("arcsin", lambda x: 3.0 * np.arcsin(x), [(0.1,)]),
    ("arctan", lambda x: 3.0 * np.arctan(x), [(0.2,)]),
    ("arccosh", lambda x: 3.0 * np.arccosh(x), [(1.9,)]),
    ("arcsinh", lambda x: 3.0 * np.arcsinh(x), [(0.37,)]),
    ("arctanh", lambda x: 3.0 * np.arctanh(x), [(0.2,)]),
    ("sqrt", lambda x: 3.0 * np.sqrt(x), [(4.2,)]),
    ("power_arg0", (lambda y: lambda x: np.power(x, y))(1.7), [(1.3,)]),
    ("power_arg1", lambda y: np.power(0.64, y), [(0.3,)]),
    ("power_arg1_zero", lambda y: np.power(0.0, y), [(0.3,)]),
    ("mod", lambda x, y: np.mod(x, y), [(0.3, 0.7)]),
    ("divide", lambda x, y: np.divide(x, y), [(0.3, 0.7)]),
    ("multiply", lambda x, y: np.multiply(x, y), [(0.3, 0.7)]),
    ("true_divide", lambda x, y: np.true_divide(x, y), [(0.3, 0.7)]),
    ("reciprocal", lambda x: np.reciprocal(x), [(0.6,)]),
    ("negative", lambda x: np.negative(x), [(0.6,)]),
    ("rad2deg", lambda x: 3.0 * np.rad2deg(x), [(4.2,)]),
    ("deg2rad", lambda x: 3.0 * np.deg2rad(x), [(4.2,)]),
    ("radians", lambda x: 3.0 * np.radians(x), [(4.2,)]),
    ("degrees", lambda x: 3.0 * np.degrees(x), [(4.2,)]),
    ("sinc", lambda x: 3.0 * np.sinc(x), [(4.2,)]),
]

# test_power_arg0's special case (c.f. autograd #116): grad(fun)(0.0) == 0.0 and grad(grad(fun))(0.0) == 0.0
ag_power_zero = (lambda y: lambda x: np.power(x, y))(0.0)


# ================================================================================================
# HIPS/autograd tests/test_graphs.py
# ================================================================================================
ag_grad_fanout = lambda x: np.sin(np.sin(x) + np.sin(x))
ag_grad_const = lambda x: 1.0
ag_grad_identity = lambda x: x
_RANDV = _rng.standard_normal(10)


def ag_hess_fun(x):
    return np.sin(np.dot(x, _RANDV))


def ag_vector_product(x, v):
    return np.sin(np.dot(v, ad.grad(ag_hess_fun)(x)))


def ag_enclosing_scope_ref(x):
    inner_fun = lambda y: x * y
    return x * ad.grad(inner_fun)(2.0)


def ag_enclosing_scope_ref_2(x):
    inner_fun = lambda y: y * x
    return x * ad.grad(inner_fun)(2.0)


def ag_mutating_outgrad(a):
    b = a + 1.0
    c = b + 1.5
    d = a + b
    e = d + c
    return e


def ag_mutating_outgrad_from_indexing(a):
    b = a + 1.0
    c = b[0] + 1.5
    d = a + b
    e = d + c
    return e


def ag_complex_mutating_outgrad_from_indexing(a):
    b = a + 1.0j
    c = b[0] + 1.5
    d = a + b
    e = d + c
    return np.sum(np.sin(np.real(e)))


ag_third_derivative_other_args = lambda x, y: np.sin(np.sin(x) + np.sin(y))
ag_singleton_array_output = lambda x: np.sum(np.sin(x), keepdims=True)
ag_singleton_array_output_axis0 = lambda x: np.sum(np.sin(x), axis=0, keepdims=False)
ag_singleton_array_output_axis1_keepdims = lambda x: np.sum(np.sin(x), axis=1, keepdims=True)


def ag_assignment(A, b):        # test_assignment_raises_error: autograd refuses the write (TypeError)
    A[1] = b
    return A


# ================================================================================================
# HIPS/autograd tests/test_builtins.py
# ================================================================================================
def ag_checker(ex, type_, truthval):
    assert isinstance(ex, type_) == truthval
    return 1.0


def _r(*shape):
    return _rng.standard_normal(shape)


_MAT_10_11 = _r(10, 11)
# (function, [argument tuples]) as the tests call check_grads
AG_NUMPY = [
    (ag_dot, [(_MAT_10_11, _r(11)), (_MAT_10_11, _r(10, 11).T), (_r(10), _MAT_10_11), (_r(11), _r(11)),
              (_MAT_10_11, 0.8), (0.8, _MAT_10_11), (_r(10), 0.8), (0.8, _r(10))]),
    (ag_outer, [(_r(11), _r(11))]),
    (ag_max, [(_r(10, 11),)]), (ag_max_axis, [(_r(3, 4, 5),)]), (ag_max_axis_keepdims, [(_r(3, 4, 5),)]),
    (ag_min, [(_r(10, 11),)]), (ag_min_axis, [(_r(3, 4, 5),)]), (ag_min_axis_keepdims, [(_r(3, 4, 5),)]),
    (ag_sum_1, [(_r(10, 11),)]), (ag_sum_2, [(_r(10, 11),)]), (ag_sum_3, [(_r(10, 11),)]),
    (ag_sum_with_axis_tuple, [(_r(10, 11, 7),)]),
    (ag_plain_sum, [(0.7,)]), (ag_plain_prod, [(0.7,)]), (ag_plain_max, [(0.7,)]), (ag_plain_min, [(0.7,)]),
    (ag_flipud, [(_r(10, 11),)]), (ag_fliplr, [(_r(10, 11),)]), (ag_rot90, [(_r(10, 11),)]),
    (ag_cumsum_axis0, [(_r(10, 11),)]), (ag_cumsum_axis1, [(_r(10, 11),)]),
    (ag_cumsum_1d, [(_r(10),), (_r(10, 11),)]),
    (ag_non_numpy_sum, [(_r(10, 11), _r(10, 11))]),
    (ag_mean_1, [(_r(10, 11),)]), (ag_mean_2, [(_r(10, 11),)]), (ag_mean_3, [(_r(10, 11),)]),
    (ag_mean_list_of_boxes, [(0.0,)]), (ag_mean_tuple_of_boxes, [(0.0,)]),
    (ag_std_list_of_boxes, [(0.0,)]), (ag_std_tuple_of_boxes, [(0.0,)]),
    (ag_var_list_of_boxes, [(0.0,)]), (ag_var_tuple_of_boxes, [(0.0,)]),
    (ag_index_ints, [(A_564,)]), (ag_index_slice, [(A_564,)]), (ag_index_lists, [(A_564,)]),
    (ag_index_mixed, [(A_564,)]), (ag_vector_slice, [(_r(5),)]), (ag_index_slice_fanout, [(A_564,)]),
    (ag_index_multiple_slices, [(_r(7),)]),
    (ag_reshape_method, [(A_564,)]), (ag_reshape_call, [(A_564,)]), (ag_reshape_method_nolist, [(A_564,)]),
    (ag_ravel_method, [(A_564,)]), (ag_ravel_call, [(A_564,)]), (ag_flatten_method, [(A_564,)]),
    (np.append, [([1.0, 2.0, 3.0], 4.0), (np.array([1.0, 2.0, 3.0]), 4.0)]),
    (ag_simple_append_list_2D, [([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0]])]),
    (ag_simple_concatenate, [(_r(4, 6, 4),)]), (ag_concatenate_axis_0, [(_r(5, 6, 4),)]),
    (ag_concatenate_axis_1, [(_r(5, 6, 4),)]), (ag_concatenate_axis_1_unnamed, [(_r(5, 6, 4),)]),
    (ag_trace, [(_r(10, 11),)]), (ag_trace2, [(_r(11, 10),)]), (ag_trace_extradims, [(_r(5, 6, 4, 3),)]),
    (ag_diag, [(_r(10, 10),)]), (ag_transpose, [(_r(8, 8),)]), (ag_roll, [(_r(4, 5),)]),
    (ag_triu, [(_r(5, 5),)]), (ag_tril, [(_r(5, 5),)]),
    (ag_clip, [(np.array([[-0.3, 0.5, 1.4], [0.2, 1.7, 0.9]]),)]),
    (ag_prod_1, [(_r(2, 3) ** 2 / 10.0 + 0.1,), (_r(7) ** 2 + 0.1,)]),
    (ag_prod_2, [(_r(2, 3) ** 2 + 0.1,)]), (ag_prod_3, [(_r(2, 3) ** 2 + 0.1,)]),
    (ag_1d_array, [(3.0,)]), (ag_2d_array, [(3.0,)]), (ag_1d_array_fanout, [(3.0,)]),
    (ag_2d_array_fanout, [(3.0,)]), (ag_array_from_scalar, [(3.0,)]),
    (ag_scalar_array_box_attributes, [(np.float64(3.0),)]),
    (ag_array_from_arrays, [(_r(3, 2),)]), (ag_array_from_arrays_2, [(_r(3, 2),)]), (ag_len, [(_r(3, 2),)]),
    (ag_r_basic, [(_r(3, 2),)]), (ag_r_double, [(_r(3, 2),)]), (ag_no_relation, [(_r(3, 2),)]),
    (ag_r_no_relation, [(_r(3, 2),)]), (ag_r_node_and_const, [(_r(3, 2),)]), (ag_r_mixed, [(_r(3, 2),)]),
    (ag_r_slicing, [(_r(10),)]), (ag_c_, [(_r(3, 2),)]),
    (np.var, [(_r(3),), (_r(3, 4),)]), (np.std, [(_r(3),), (_r(1, 3),)]),
    (ag_var_ddof, [(_r(3, 4),)]), (ag_std_ddof, [(_r(3),)]),
    (ag_where, [(_r(4, 5), _r(4, 5))]),
    (ag_squeeze_func, [(_r(5, 1, 4),)]), (ag_squeeze_method, [(_r(5, 1, 4),)]),
    (ag_repeat, [(_r(5, 3, 4),)]), (ag_repeat_axis1_rep1, [(_r(5, 3, 4),)]),
    (ag_repeat_axis0, [(_r(5, 3),), (_r(5),), (_r(5, 1),)]),
    (ag_expand_dims, [(_r(5, 1, 4),)]), (ag_tensordot_kwargs_by_position, [(1.0,)]),
    (ag_multi_index, [(_r(3),)]), (ag_multi_index2, [(_r(3),)]), (ag_index_dot_slices, [(_r(4),)]),
    (ag_cast_to_int, [(_r(5, 10),)]), (ag_diagonal, [(_r(4, 4),), (_r(3, 4, 4),)]),
    (ag_nan_to_num, [(_r(4),)]),
    (ag_max_equal_values, [(1.0,)]), (ag_max_equal_values_2d, [(1.0,), (-1.0,)]),
    (ag_min_3_way_equality, [(1.0,), (-1.0,)]), (ag_maximum_equal_values, [(1.0,)]),
    (ag_maximum_equal_values_2d, [(1.0,), (-1.0,), (2.0,)]),
    (ag_linspace, [(1.2, 3.4), (1.2, -3.4), (1.2, 1.2), (1.2, 3.4, 0), (1.2, 3.4, 1)]),
    (ag_mutating_outgrad, [(_r(5),)]), (ag_mutating_outgrad_from_indexing, [(_r(5),)]),
    (ag_complex_mutating_outgrad_from_indexing, [(_r(5),)]),
    (ag_grad_fanout, [(0.37,)]), (ag_grad_const, [(2.0,)]), (ag_grad_identity, [(2.0,)]),
    (ag_hess_fun, [(_r(10),)]), (ag_vector_product, [(_r(10), _r(10))]),
    (ag_enclosing_scope_ref, [(1.0,)]), (ag_enclosing_scope_ref_2, [(1.0,)]),
    (ag_third_derivative_other_args, [(0.37, -0.52)]),
    (ag_singleton_array_output_axis0, [(_r(3, 1),)]), (ag_assignment, [(_r(5), 3.0)]),
    (ag_gradient, [(_r(10),)]),
    (ag_checker, [([], list, True), ((), list, False), (np.zeros(1), np.ndarray, True), ([], np.ndarray, False),
                  ([], (tuple, list), True), ((), (tuple, list), True), (np.zeros(1), (tuple, list), False)]),
]

# functions of arrays that the suite checks at second order (autograd's check_grads checks order 2)
AG_HVP = [(ag_hess_fun, (_r(10),)), (ag_vector_product, (_r(10), _r(10))), (ag_prod_1, (_r(7) ** 2 + 0.1,)),
          (ag_complex_mutating_outgrad_from_indexing, (_r(5),)), (ag_cast_to_int, (_r(5, 10),)),
          (ag_nan_to_num, (_r(4),)), (ag_plain_prod, (0.7,)), (ag_std_ddof, (_r(3),)), (ag_index_dot_slices, (_r(4),)),
          (ag_multi_index2, (_r(3),))]


# ================================================================================================
# HIPS/autograd tests/test_systematic.py (with tests/numpy_utils.py's stat_check, unary_ufunc_check and
# binary_ufunc_check) and tests/test_linalg.py. combo_check(fun, argnums)(pools..., **kw_pools) checks fun
# at every combination of the pools; here each combination is one case of AG_SYSTEMATIC, (name, a
# function of the differentiated arguments, their values), the other arguments and keywords bound in the
# function. Real values only: the complex pools are left out (the check moves float entries). The
# functions tensorlang.ad has no rule for are in AG_REFUSED (name, function, arguments, reason).
# ================================================================================================
_sys = np.random.RandomState(0)


def R(*shape):
    return _sys.randn(*shape)


def _lims(lims, x):   # numpy_utils.transform
    return x * (lims[1] - lims[0]) + lims[0]


_MAKERS = {}


def _bound(fun, before=(), after=(), arity=1, **kw):
    """fun of its `arity` differentiated arguments, with the fixed ones before and after them and the
    keywords bound. tensorlang.ad takes no star-arguments, so the call is spelt out: one factory per
    form of the call (compiled from source registered with linecache, which tensorlang.ad reads), whose
    closures share one code object."""
    form = (len(before), arity, len(after), tuple(kw))
    if form not in _MAKERS:
        xs = [f"x{i}" for i in range(arity)]
        bs, as_ = [f"b{i}" for i in range(len(before))], [f"a{i}" for i in range(len(after))]
        call = ", ".join(bs + xs + as_ + [f"{k}=k_{k}" for k in kw])
        src = (f"def make({', '.join(['fun'] + bs + as_ + [f'k_{k}' for k in kw])}):\n"
               f"    def call({', '.join(xs)}):\n        return fun({call})\n    return call\n")
        name = f"<peer_functions call form {len(_MAKERS)}>"
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        ns = {}
        exec(compile(src, name, "exec"), ns)
        _MAKERS[form] = ns["make"]
    return _MAKERS[form](fun, *before, *after, *kw.values())


def _combo(name, fun, pools, before=(), after=(), **kw_pools):
    """combo_check: every combination of the argument pools and keyword pools."""
    keys = list(kw_pools)
    out = []
    for kws in itertools.product(*(kw_pools[k] for k in keys)):
        f = _bound(fun, before, after, len(pools), **dict(zip(keys, kws)))
        out += [(name, f, list(args)) for args in itertools.product(*pools)]
    return out


def _stat(name, fun):   # numpy_utils.stat_check without its complex pools
    x, A, B, C, D = 3.5, R(), R(3), R(2, 3), R(1, 3)
    return (_combo(name, fun, [[x, A]]) + _combo(name, fun, [[B, C, D]], axis=[None, 0], keepdims=[True, False])
            + _combo(name, fun, [[C, D]], axis=[None, 0, 1], keepdims=[True, False]))


def _unary(name, fun, lims=(-2, 2)):   # numpy_utils.unary_ufunc_check without its complex pools
    return _combo(name, fun, [[_lims(lims, 0.4), _lims(lims, _sys.rand(2)), _lims(lims, _sys.rand(3, 2)),
                               _lims(lims, _sys.rand(1, 2))]])


def _binary(name, fun, lims_a=(-2, 2), lims_b=(-2, 2), same=True):
    """numpy_utils.binary_ufunc_check (same=True: both pools from the same draws) and
    binary_ufunc_check_no_same_args, without their complex pools."""
    draws = [(0.6, 0.6), (_sys.rand(2),) * 2, (_sys.rand(3, 2),) * 2, (_sys.rand(1, 2),) * 2]
    if not same:
        draws = [(0.6, 0.7), (_sys.rand(2), _sys.rand(2)), (_sys.rand(3, 2), _sys.rand(3, 2)),
                 (_sys.rand(1, 2), _sys.rand(1, 2))]
    return _combo(name, fun, [[_lims(lims_a, a) for a, _ in draws], [_lims(lims_b, b) for _, b in draws]])


def _einsum2_matmult(a, b):
    return np.einsum(a, (0, 1), b, (1, 2), (0, 2))


def _einsum2_covsum(a, b):
    return np.einsum(a, (0, 1, 2), b, (3, 1, 0), (3, 2, 0))


_E2_THIRD = R(4, 4, 3)


def _einsum2_three_args(a, b):
    return np.einsum(a, (0, 1, 2), b, (3, 1, 0), _E2_THIRD, (3, 3, 0), (3, 2, 0))


def _einsum2_matmult_broadcast(a, b):
    return np.einsum(a, (Ellipsis, 0, 1), b, (Ellipsis, 1, 2), (Ellipsis, 0, 2))


def _systematic():
    cases = []
    for name in ("max", "mean", "min", "sum", "prod", "var", "std"):
        cases += _stat(name, getattr(np, name))
    for name, lims in [("sin", None), ("abs", (0.1, 4.0)), ("absolute", (0.1, 4.0)), ("arccosh", (1.1, 4.0)),
                       ("arcsinh", (-0.9, 0.9)), ("arctanh", (-0.9, 0.9)), ("cos", None), ("cosh", None),
                       ("deg2rad", None), ("exp", None), ("exp2", None), ("expm1", None), ("fabs", None),
                       ("log", (0.2, 2.0)), ("log10", (0.2, 2.0)), ("log1p", (0.2, 2.0)), ("log2", (0.2, 2.0)),
                       ("radians", None), ("sign", None), ("sinh", None), ("sqrt", (1.0, 3.0)), ("square", None),
                       ("tan", (-1.1, 1.1)), ("tanh", None), ("real", None), ("imag", None), ("conj", None),
                       ("conjugate", None), ("angle", None)]:
        cases += _unary(name, getattr(np, name), lims or (-2, 2))
    cases += _unary("ceil", np.ceil, (-1.5, 1.5)) + _unary("floor", np.floor, (-1.5, 1.5))   # (derivative 0)
    cases += _unary("degrees", lambda x: np.degrees(x) / 50.0)
    cases += _unary("rad2deg", lambda x: np.rad2deg(x) / 50.0)
    cases += _binary("add", np.add) + _binary("logaddexp", np.logaddexp) + _binary("logaddexp2", np.logaddexp2)
    cases += _binary("remainder", np.remainder, (-0.9, 0.9), (0.7, 1.9), same=False)
    cases += _binary("true_divide", np.true_divide, lims_b=(0.8, 1.2))
    cases += _binary("mod", np.mod, lims_b=(0.8, 2.1), same=False)
    cases += _binary("true_divide_neg", np.true_divide, lims_b=(-0.3, -2.0))
    cases += _binary("mod_neg", np.mod, lims_b=(-0.3, -2.0), same=False)
    cases += _binary("op_mul", operator.mul) + _binary("op_add", operator.add) + _binary("op_sub", operator.sub)
    cases += _binary("op_mod", operator.mod, lims_b=(0.3, 2.0), same=False)
    cases += _binary("op_mod_neg", operator.mod, lims_b=(-0.3, -2.0), same=False)
    cases += _combo("transpose", np.transpose, [[R(2, 3, 4)]],
                    axes=[None, [0, 1, 2], [0, 2, 1], [2, 0, 1], [2, 1, 0], [1, 0, 2], [1, 2, 0]])
    cases += _combo("moveaxis", np.moveaxis, [[R(2, 3, 4)]], source=[0, 1, 2], destination=[0, 1, 2])
    cases += _combo("repeat", np.repeat, [[R(2, 3, 4), R(3, 1)]], repeats=[0, 1, 2], axis=[None, 0, 1])
    cases += _combo("diff", np.diff, [[R(5, 5), R(5, 5, 5)]], n=[1, 2], axis=[0, 1])
    cases += _combo("diff", np.diff, [[R(1), R(1, 1)]], axis=[0]) + _combo("diff", np.diff, [[R(1, 1), R(3, 1)]], axis=[1])
    cases += _combo("tile", np.tile, [[R(2, 1, 3, 1)]], reps=[(1, 4, 1, 2)])
    cases += _combo("tile", np.tile, [[R(1, 2)]], reps=[(1, 2), (2, 3), (3, 2, 1)])
    cases += _combo("tile", np.tile, [[R(1)]], reps=[(2,), 2])
    cases += _combo("kron", np.kron, [[R(5, 5), R(4, 4), R(5), R(5, 1), R(1, 5), R()],
                                      [R(3, 3), R(2, 2), R(3), R(1, 3), R(3, 1), R()]])
    cases += _combo("inner", np.inner, [[1.5, R(3), R(2, 3)], [0.3, R(3), R(4, 3)]])
    cases += _combo("dot", np.dot, [[1.5, R(3), R(2, 3), R(2, 2, 3)], [0.3, R(3), R(3, 4), R(2, 3, 4)]])
    cases += _combo("outer", np.outer, [[R(3)], [R(3)]])
    cases += _combo("matmul", np.matmul, [[R(3), R(2, 3), R(2, 2, 3)], [R(3), R(3, 4), R(2, 3, 4)]])
    cases += _combo("matmul_broadcast", np.matmul, [[R(1, 2, 2)], [R(3, 2, 1)]])
    for name, a, b, axes in [
            ("tensordot_1", [R(1, 3), R(2, 3, 2)], [R(3), R(3, 1), R(3, 4, 2)], [[(1,), (0,)]]),
            ("tensordot_2", [R(3), R(3, 1), R(3, 4, 2)], [R(1, 3), R(2, 3, 2)], [[(0,), (1,)]]),
            ("tensordot_3", [R(2, 3), R(2, 3, 4)], [R(1, 2, 3), R(2, 2, 3, 4)], [[(0, 1), (1, 2)], [(1, 0), (2, 1)]]),
            ("tensordot_4", [R(2, 2), R(4, 2, 2)], [R(2, 2), R(2, 2, 4)], [1, 2]),
            ("tensordot_5", [R(4)], [R()], [0]), ("tensordot_6", [R(2, 6)], [R(6, 3)], [[[-1], [0]]]),
            ("tensordot_7", [R(2, 6)], [R(6, 3)], [[-1, 0]]), ("tensordot_8", [R(2)], [R(2, 2)], [[0, 1]])]:
        cases += _combo(name, np.tensordot, [a, b], axes=axes)
    for name in ("maximum", "fmax", "minimum", "fmin"):
        cases += _combo(name, getattr(np, name), [[R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)]])
    cases += _combo("sort", np.sort, [[R(1), R(7)]])
    cases += _combo("partition", np.partition, [[R(7), R(3, 4)]], kth=[1, 2])
    cases += _combo("atleast_1d", np.atleast_1d, [[1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]])
    cases += _combo("atleast_2d", np.atleast_2d, [[1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]])
    cases += _combo("atleast_3d", np.atleast_3d, [[1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5), R(2, 4, 3, 5)]])
    for name, spec, pools in [
            ("einsum_transpose", "ij->ji", [[R(1, 1), R(4, 4), R(3, 4)]]),
            ("einsum_matmult", "ij,jk->ik", [[R(2, 3)], [R(3, 4)]]),
            ("einsum_matmult_broadcast", "...ij,...jk->...ik", [[R(2, 3), R(2, 2, 3)], [R(3, 4), R(2, 3, 4)]]),
            ("einsum_matmult_broadcast_leadzero", "...ij,...jk->...ik", [[R(0, 2, 3)], [R(0, 3, 4)]]),
            ("einsum_covsum", "ijk,lji->lki", [[R(3, 4, 4)], [R(4, 4, 3)]]),
            ("einsum_ellipses", "...jk,...lj->...lk", [[R(4, 4), R(3, 4, 4)], [R(4, 4), R(3, 4, 4)]]),
            ("einsum_ellipses", "...,...->...", [[R(4, 4), R(3, 4, 4)], [R(4, 4), R(3, 4, 4)]]),
            ("einsum_ellipses_tail", "jk...,lj...->lk...", [[R(3, 2), R(3, 2, 4)], [R(2, 3), R(2, 3, 4)]]),
            ("einsum_ellipses_center", "j...k,lj...->lk...", [[R(2, 2), R(2, 2, 2)], [R(2, 2), R(2, 2, 2)]]),
            ("einsum_three_args", "ijk,lji,lli->lki", [[R(3, 4, 4)], [R(4, 4, 3)], [R(4, 4, 3)]]),
            ("einsum_naked_sum", "k,nk->", [[R(5)], [R(10, 5)]]),
            ("einsum_naked_sum2", "abcd->bd", [[R(3, 2, 3, 2)]]),
            ("einsum_naked_sum_ellipsis", "...k,...nk->...", [[R(3, 5)], [R(3, 10, 5)]]),
            ("einsum_no_output_indices", "ij,k", [[R(3, 4)], [R(3)]])]:
        cases += _combo(name, np.einsum, pools, before=(spec,))
    cases += _combo("einsum2_transpose", np.einsum, [[R(1, 1), R(4, 4), R(3, 4)]], after=((0, 1), (1, 0)))
    cases += _combo("einsum2_matmult", _einsum2_matmult, [[R(2, 3)], [R(3, 4)]])
    cases += _combo("einsum2_matmult_broadcast", _einsum2_matmult_broadcast, [[R(2, 3), R(2, 2, 3)], [R(3, 4), R(2, 3, 4)]])
    cases += _combo("einsum2_covsum", _einsum2_covsum, [[R(3, 4, 4)], [R(4, 4, 3)]])
    cases += _combo("einsum2_three_args", _einsum2_three_args, [[R(3, 4, 4)], [R(4, 4, 3)]])
    cases += _combo("trace", np.trace, [[R(5, 5), R(4, 5), R(5, 4), R(3, 4, 5)]], offset=[-1, 0, 1])
    cases += _combo("diag", np.diag, [[R(5, 5)]], k=[-1, 0, 1]) + _combo("diag_flat", np.diag, [[R(5)]], k=[-1, 0, 1])
    for name, fun, shape in [("tril", np.tril, (5, 5)), ("triu", np.triu, (5, 5)), ("tril_3d", np.tril, (5, 5, 4)),
                             ("triu_3d", np.triu, (5, 5, 4))]:
        cases += _combo(name, fun, [[R(*shape)]], k=[-1, 0, 1])
    cases += _combo("swapaxes", np.swapaxes, [[R(3, 4, 5)]], axis1=[0, 1, 2], axis2=[0, 1, 2])
    cases += _combo("rollaxis", np.rollaxis, [[R(2, 3, 4)]], axis=[0, 1, 2], start=[0, 1, 2])
    cases += _combo("cross", np.cross, [[R(3, 3)], [R(3, 3)]], axisa=[-1, 0, 1], axisb=[-1, 0, 1], axisc=[-1, 0, 1],
                    axis=[None, -1, 0, 1])
    for name, fun, pools, sections, axes in [
            ("vsplit_2d", np.vsplit, [[R(4, 8)]], [4, [1, 2]], [None]),
            ("vsplit_3d", np.vsplit, [[R(4, 4, 4)]], [2, [1, 2]], [None]),
            ("hsplit_2d", np.hsplit, [[R(4, 8)]], [4, [1, 2]], [None]),
            ("hsplit_3d", np.hsplit, [[R(4, 4, 4)]], [2, [1, 2]], [None]),
            ("dsplit_3d", np.dsplit, [[R(4, 4, 4)]], [2, [1, 2]], [None]),
            ("split_1d", np.split, [[R(1), R(7)]], [1], [0]), ("split_2d", np.split, [[R(4, 8)]], [4, [1, 2]], [0, 1]),
            ("split_3d", np.split, [[R(4, 4, 4)]], [2, [1, 2]], [0, 1, 2]),
            ("array_split_1d", np.array_split, [[R(1), R(7)]], [1, 3], [0]),
            ("array_split_2d", np.array_split, [[R(7, 7)]], [4, [3, 5]], [0, 1]),
            ("array_split_3d", np.array_split, [[R(7, 7, 7)]], [4, [3, 5]], [0, 1, 2])]:
        for s in sections:
            cases += (_combo(name, fun, pools, after=(s,)) if axes == [None]
                      else _combo(name, fun, pools, after=(s,), axis=axes))
    cases += _combo("concatenate_1ist", np.concatenate, [[(R(1), R(3))]], axis=[0])
    cases += _combo("concatenate_tuple", np.concatenate, [[[R(1), R(3)]]], axis=[0])
    cases += _combo("concatenate_2d", np.concatenate, [[(R(2, 2), R(2, 2))]], axis=[0, 1])
    cases += _combo("concatenate_3d", np.concatenate, [[(R(2, 2, 2), R(2, 2, 2))]], axis=[0, 1, 2])
    for name, fun, pool in [
            ("vstack_1d", np.vstack, [R(2), (R(2), R(2))]), ("vstack_2d", np.vstack, [R(2, 3), (R(2, 4), R(1, 4))]),
            ("vstack_3d", np.vstack, [R(2, 3, 4), (R(2, 3, 4), R(5, 3, 4))]),
            ("hstack_1d", np.hstack, [R(2), (R(2), R(2))]), ("hstack_2d", np.hstack, [R(3, 2), (R(3, 4), R(3, 5))]),
            ("hstack_3d", np.hstack, [R(2, 3, 4), (R(2, 1, 4), R(2, 5, 4))]),
            ("row_stack_1d", np.vstack, [R(2), (R(2), R(2))]),   # np.row_stack is np.vstack (deprecated alias)
            ("row_stack_2d", np.vstack, [R(2, 3), (R(2, 4), R(1, 4))]),
            ("column_stack_1d", np.column_stack, [R(2), (R(2), R(2))]),
            ("column_stack_2d", np.column_stack, [R(2, 2), (R(2, 2), R(2, 2))])]:
        cases += _combo(name, fun, [pool])
    cases += _combo("stack_1d", np.stack, [[(R(2),), (R(2), R(2))]], axis=[0, 1])
    conds = [R(3, 4, 5) > 0, R(3, 4, 5) > 0, R(3, 4, 5) > 0]
    cases += _combo("select", np.select, [[[R(3, 4, 5), R(3, 4, 5), R(3, 4, 5)]]], before=(conds,), default=[0.0, 1.1])
    for width in [0, 3, (3,), (3, 2), ((3, 2),), ((1, 2), (3, 4)), ((0, 0), (0, 0))]:
        cases += _combo("pad", np.pad, [[R(2, 2)]], after=(width, "constant"))
    return cases


def _linalg():   # tests/test_linalg.py (its check_grads is reverse mode only)
    rs = np.random.RandomState(1)

    def psd(d):
        m = rs.randn(d, d)
        return m @ m.T

    m8 = rs.randn(8, 8)
    cases = [("inv", np.linalg.inv, [m8 @ m8 + np.eye(8)]),
             ("inv_3d", np.linalg.inv, [rs.randn(4, 4, 4) + 5 * np.eye(4)]),
             ("inv_3d", np.linalg.inv, [rs.randn(4, 4, 4, 4) + 5 * np.eye(4)])]
    b_8_7, b_8 = rs.randn(8, 7), rs.randn(8)
    cases += [("solve_arg1", _bound(np.linalg.solve, after=(b_8_7,)), [rs.randn(8, 8) + 10.0 * np.eye(8)]),
              ("solve_arg1_1d", _bound(np.linalg.solve, after=(b_8,)), [rs.randn(8, 8) + 10.0 * np.eye(8)])]
    a6 = rs.randn(6, 6) + np.eye(6)
    cases += [("solve_arg2", _bound(np.linalg.solve, before=(a6,)), [rs.randn(6, 5)])]
    b_5_4 = rs.randn(5, 4)
    cases += [("solve_arg1_3d", lambda a: np.linalg.solve(a, b_5_4[..., None])[..., 0], [rs.randn(5, 4, 4) + 5 * np.eye(4)])]
    b_5_4_6 = rs.randn(5, 4, 6)
    cases += [("solve_arg1_3d_3d", _bound(np.linalg.solve, after=(b_5_4_6,)), [rs.randn(5, 4, 4) + 5 * np.eye(4)])]
    cases += [("det", np.linalg.det, [rs.randn(6, 6)]), ("det_3d", np.linalg.det, [rs.randn(3, 3, 3)])]
    m6 = rs.randn(6, 6)
    cases += [("slogdet", lambda x: np.linalg.slogdet(x)[1], [m6]), ("slogdet", lambda x: np.linalg.slogdet(x)[1], [-m6]),
              ("slogdet_3d", lambda x: np.sum(np.linalg.slogdet(x)[1]),
               [np.concatenate([(psd(5) + 5 * np.eye(5))[None, ...] for _ in range(3)])])]
    cases += [("vector_2norm", np.linalg.norm, [rs.randn(6)]),
              ("norm_list_of_boxes", lambda x: np.linalg.norm([x, x + 2]), [0.0]),
              ("norm_tuple_of_boxes", lambda x: np.linalg.norm((x, x + 2)), [0.0]),
              ("frobenius_norm", np.linalg.norm, [rs.randn(6, 5)]),
              ("frobenius_norm_axis", _bound(np.linalg.norm, axis=(0, 1)), [rs.randn(6, 5, 4)])]
    cases += [(f"vector_norm_ord{o}", _bound(np.linalg.norm, ord=o), [rs.randn(6)]) for o in range(2, 5)]
    cases += [(f"norm_axis{a}", _bound(np.linalg.norm, axis=a), [rs.randn(6, 5, 4)]) for a in range(3)]
    return cases


def _eigh(x):
    w, v = np.linalg.eigh(x)
    return w, v


def _svd(x):
    u, s, v = np.linalg.svd(x, full_matrices=False)
    return u, s, v


def _cholesky_reparameterization_trick(a):
    z = np.dot(np.linalg.cholesky(a), np.random.RandomState(0).randn(a.shape[0]))
    return np.linalg.norm(z)


def _symmetrized(fun):   # test_linalg.check_symmetric_matrix_grads
    def f(a):
        lower = np.tril(a)
        return fun((lower + np.swapaxes(lower, -1, -2)) / 2.0)
    return f


_M6 = R(6, 6)
_PSD = _M6 @ _M6.T + 6 * np.eye(6)
# the symmetric factorisations, each as autograd's test calls it (symmetrised) and as NumPy's function alone
# (which reads the lower triangle), the singular value decomposition and the pseudo-inverse
_SYMMETRIC = [("eigvalh_lower", _eigh, [_PSD]), ("eigh_symmetrized", _symmetrized(_eigh), [_PSD]),
              ("cholesky", _symmetrized(np.linalg.cholesky), [_PSD]), ("cholesky_lower", np.linalg.cholesky, [_PSD]),
              ("cholesky_reparameterization_trick", _symmetrized(_cholesky_reparameterization_trick), [_PSD]),
              ("svd_wide_2d", _svd, [R(3, 5)]), ("svd_tall_2d", _svd, [R(5, 3)]),
              ("svd_only_s_2d", _bound(np.linalg.svd, full_matrices=False, compute_uv=False), [R(5, 3)]),
              ("pinv", np.linalg.pinv, [R(5, 3)]), ("norm_nuclear", _bound(np.linalg.norm, ord="nuc"), [R(6, 5)]),
              ("eig_real", lambda x: tuple(np.abs(e) for e in np.linalg.eig(x)), [R(4, 4)])]
AG_SYSTEMATIC = ([(f"systematic.{n}", f, a) for n, f, a in _systematic() + [("gradient", np.gradient, [R(5, 5)])]]
                 + [(f"linalg.{n}", f, a) for n, f, a in _linalg() + _SYMMETRIC])


# the test functions of NumPy calls tensorlang.ad has no rule for, with the refusal it gives
AG_REFUSED = [
    ("systematic.real_ic", np.real_if_close, [R(3, 2)], "no derivative rule for numpy.real_if_close"),
    ("systematic.unwrap", np.unwrap, [R(5)], "no derivative rule for numpy.unwrap"),
]
# checked at second order as well (ad.hvp and ad.hessian of a scalar function of each): the first case of
# each name whose arguments are arrays
AG_SYSTEMATIC_HVP = {f"systematic.{n}" for n in (
    "prod", "var", "std", "max", "sqrt", "arctanh", "logaddexp", "true_divide", "remainder", "kron", "tensordot_3",
    "dot", "matmul", "maximum", "sort", "einsum_covsum", "einsum2_three_args", "trace", "cross", "pad", "repeat",
    "diff")} | {f"linalg.{n}" for n in ("inv_3d", "solve_arg2", "det", "slogdet", "cholesky", "cholesky_lower",
                                        "svd_only_s_2d", "pinv", "frobenius_norm_axis", "vector_norm_ord3",
                                        "norm_axis1")}
