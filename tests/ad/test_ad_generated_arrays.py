"""Random programs over arrays, written as Python source from a small grammar: arrays made by
constructors and written element by element (RNN style ``h[t] = ...``), slices and views written
through (``v = y[a:b]; v *= c``, ``y.reshape(...)``, ``y[::-1]``), augmented assignments, fancy-index
``+=`` and reads of single entries; executed, differentiated, and compared with central differences."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import check_generated_program   # tests/ad is on the path (rootdir conftest)

N = 4


def _statement(draw):
    """One line that reads the input x (length N) and the work array y, and writes y."""
    i, j = draw(st.integers(0, N - 1)), draw(st.integers(0, N - 1))
    a = draw(st.integers(0, N - 2))
    c = draw(st.sampled_from(["0.5", "1.5", "-0.75"]))
    expr = draw(st.sampled_from([f"x[{i}] * y[{j}]", f"np.tanh(y[{j}] + x[{i}])", f"{c} * x[{i}]",
                                 f"y[{j}] * y[{i}] + x[{j}]", f"np.sin(x[{i}]) * {c}"]))
    return draw(st.sampled_from([
        f"y[{i}] = {expr}",
        f"y[{i}] += {expr}",
        f"v = y[{a}:]\n    v *= {c}",
        f"v = y[::-1]\n    v[{i}] = {expr}",
        f"v = y.reshape(2, {N // 2})\n    v[1, 0] = {expr}",
        f"y[{a}:{a} + 2] = x[:2] * {c}",
        f"y[[{i}, {j}, {i}]] += x[:3]",
        f"y *= {c}",
        f"y = y + {expr}",
        f"s = s + y[{i}] * x[{j}]",
    ]))


@st.composite
def programs(draw):
    start = draw(st.sampled_from(["np.zeros(N)", "np.zeros_like(x)", "np.ones(N)", "x * 1.0", "np.empty(N) * 0.0"]))
    body = [_statement(draw) for _ in range(draw(st.integers(1, 5)))]
    lines = ["def f(x):", f"    y = {start}", "    s = 0.0"] + [f"    {b}" for b in body]
    lines.append("    return np.sum(y * y) + s")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2 ** 16))
def test_generated_array_programs_match_finite_differences(src, seed):
    check_generated_program(src, seed, N, {"np": np, "N": N}, "array program")
