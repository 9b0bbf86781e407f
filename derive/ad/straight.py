"""The straight-line fast path of ``ad.grad``: a function of numbers with one basic block (no loops, no
branches) whose instructions are all inlined scalar arithmetic and ``math`` calls gets its gradient as
one tight Python function: the primal and then the adjoint as plain local assignments, no block
dispatch, tags, stack, boxes or hidden ``f`` argument, the known rules' derivatives written in as
expressions, constants (``math.sin`` ...) bound as default arguments (``LOAD_FAST``).

The function checks the exact types of its arguments first (``float`` for differentiated ones, ``int``
for the others, as when it was made) and otherwise hands over to ``ad.gradient``.
"""
from __future__ import annotations

import linecache
import re

from . import primal, rules
from .emit import Gen, at_source_lines, generated_name, renamed
from .source import function_node
from .ir import INT, NUM, Instr
from .runtime import HELPERS

_SEED = "1.0"


def _eligible(fn, types_) -> bool:
    if len(fn.blocks) != 1 or fn.freevars or any(t not in (float, int) for t in types_):
        return False
    b = fn.blocks[0]
    if b.phis or not b.term or b.term[0] != "return":
        return False
    for ins in b.instrs:
        op = ins.op
        if op in ("param", "const"):
            continue
        if op == "prim" and ins.kind in (INT, NUM):
            continue
        if op == "binop" and ins.kind in (INT, NUM) and (ins.attr in rules.INLINE_BINOPS or not ins.active):
            continue
        if op == "unary" and ins.kind in (INT, NUM) and (ins.attr in rules.INLINE_UNARY or not ins.active):
            continue
        if op == "compare" and not ins.active:
            continue
        return False
    ret = b.term[1]
    return isinstance(ret, Instr) and ret.active and ret.kind == NUM


def _is_float(v, floats) -> bool:
    if not isinstance(v, Instr):
        return False
    if v.op == "param":
        return v.active and v.kind == NUM   # guarded to be exactly float
    if v.op == "const":
        return type(v.attr) is float
    if v.op == "prim":
        f = v.attr[0]
        if rules.float_result(f):
            return True
        return all(a in floats for a in v.args)   # abs, min, max: a float where every argument is one
    if v.op == "binop":
        return v.attr == "/" or any(a in floats for a in v.args)
    if v.op == "unary":
        return v.args[0] in floats
    return False


def generate(fn, types_, qualname, pick=None, value=False):
    """The source of the straight-line gradient function and its defaults, or None if not eligible.  It
    returns the tuple of every argument's gradient when ``pick`` is None; else the gradient in argument
    ``pick`` (an int) or the tuple of those in ``pick`` (a tuple of ints, all in range), takes keyword
    arguments and hands a call that passes some over to its fallback; with ``value``, the pair
    ``(f's value, that)``."""
    if not _eligible(fn, types_):
        return None
    g = Gen(fn)
    b = fn.blocks[0]
    params = [ins for ins in b.instrs if ins.op == "param"]
    body = []
    for ins in b.instrs:
        body += primal.source_line(primal.instr(g, ins), ins)
    floats = set()
    for ins in b.instrs:
        if _is_float(ins, floats):
            floats.add(ins)
    float_names = {g.val(v) for v in floats}
    ret = b.term[1]
    terms: dict = {ret: [_SEED]}
    safe: dict = {}   # value -> its gradient is known to be a float
    names: dict = {}  # value -> the name or literal of its gradient

    def is_safe(expr, template):
        if " if " in template or "//" in template or "%" in template:
            return False
        return any(n in float_names or n in safe_names or n.startswith("_k") and n in math_names
                   for n in re.findall(r"_[a-z]+\d+", expr)) or _SEED in expr

    safe_names: set = set()
    math_names: set = set()

    def grad_of(v):
        """Materialise the gradient of ``v`` (all its users done): a name or literal."""
        ts = terms.get(v)
        if not ts:
            return None
        if ts == [_SEED]:
            return _SEED
        d = f"_d{v.id}"
        body.append(f"{d} = {' + '.join(ts)}")
        if safe.get(v):
            safe_names.add(d)
        return d

    for ins in reversed(b.instrs):
        if ins.op not in ("prim", "binop", "unary") or not ins.active:
            continue
        dy = grad_of(ins)
        if dy is None:
            continue
        temps = rules.scalar_templates(ins.op, ins.attr)
        for t, a, expr in g.fill_templates(temps, ins, g.val, dy, lambda a: a.active and a.kind != INT, math_names):
            ok = is_safe(expr, t)
            if dy == _SEED:   # 1.0 * e -> e, where e is still a float
                short = expr.replace(f"-{_SEED} * ", "-").replace(f"{_SEED} * ", "")
                if short != expr and is_safe(short, t):
                    expr = short
            terms.setdefault(a, []).append(expr)
            safe[a] = safe.get(a, False) or ok
    grads = []
    for p, t in zip(params, types_):
        if not p.active or p.kind == INT:
            grads.append("None")
            continue
        d = grad_of(p)
        if d is None:
            grads.append("0.0")
        elif d == _SEED or safe.get(p):
            grads.append(d)
        else:
            grads.append(f"_ad_float({d})")
            g.env["_ad_float"] = float
    args = [g.val(p) for p in params]
    guard = " or ".join(f"_ad_type({a}) is not {'_ad_flt' if t is float else '_ad_int'}"
                        for a, t in zip(args, types_))
    keywords = ""
    if pick is not None:
        keywords = ", **_ad_kw"
        guard = f"_ad_kw or {guard}" if guard else "_ad_kw"
    returned = f"({''.join(x + ', ' for x in grads)})" if pick is None else grads[pick] if isinstance(pick, int) \
        else f"({''.join(grads[i] + ', ' for i in pick)})"
    if value:
        returned = f"{g.val(ret)}, {returned}"
    env = dict(g.env)
    env.update(_ad_type=type, _ad_flt=float, _ad_int=int, _ad_fb=None)
    # the runtime's helpers that the templates name (``_ad_times``, ``_ad_powd`` in a power's partials)
    env.update({k: HELPERS[k] for k in sorted(set(re.findall(r"\b_ad_\w+", "\n".join(body))) & HELPERS.keys())})
    # positional defaults, not keyword-only ones: CPython 3.11 specialises calls of the former only
    # (``CALL_PY_WITH_DEFAULTS``); ``_ad_type`` first, so that a surplus argument fails loudly
    order = ["_ad_type"] + sorted(set(env) - {"_ad_type"})
    env = {k: env[k] for k in order}
    name = "_ad_grad_" + re.sub(r"\W", "_", qualname)
    lines = [f"def {name}({''.join(a + ', ' for a in args)}{', '.join(k + '=None' for k in order)}{keywords}):"]
    if guard:
        lines += [f"    if {guard}:", f"        return _ad_fb({', '.join(args + ['**_ad_kw'] * bool(keywords))})"]
    lines += ["    " + x for x in body]
    lines.append(f"    return {returned}")
    return "\n".join(lines) + "\n", env, name


def compile_straight(fn, types_, f, fallback, pick=None, value=False):
    """The compiled straight-line gradient function of ``f`` (its IR ``fn``; the function's defaults set), or
    None; ``pick`` and ``value`` as for ``generate``.  It is compiled at the lines of the user's source that its statements came from, so
    that an error raised in it shows the user's line."""
    qualname = f.__qualname__
    made = generate(fn, types_, qualname, pick, value)
    if made is None:
        return None
    src, env, name = made
    env["_ad_fb"] = fallback
    filename = generated_name("tensorlang.ad.grad", qualname)
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns: dict = {}
    exec(at_source_lines(src, filename, *function_node(f)[1:]), f.__globals__, ns)
    func = ns[name]
    func.__code__ = renamed(func.__code__, {name: (qualname.rsplit(".", 1)[-1], qualname)})  # the user's name
    func.__defaults__ = tuple(env.values())
    func.__ad_source__ = src
    return func
