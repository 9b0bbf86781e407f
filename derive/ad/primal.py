"""The primal: each block's instructions as Python statements.  An active call that is not inlined
becomes ``y, B = J(f, args...)`` (a pullback per call); a block that can run more than once pushes the
values its adjoint needs (its alphas) on the stack ``_t`` at its end; entering a join records which
predecessor it came from (the branch tag: on the stack inside loops, in a local variable outside).
"""
from __future__ import annotations

from . import rules
from .analysis import calls_write_free
from .ir import ANY, ARR, INT, NUM, Instr, has_gradient


def instr(g, ins: Instr) -> list[str]:
    """The primal statements of one instruction.  An array argument written again later is copied when
    the instruction keeps it for its pullback (copy on capture, not where it stores it); a call given such
    a copy has what it wrote into the copy written into the array, and views of the copy it returns made
    views of the array (``runtime.cut``); what a call returns and code after it may write into has its values
    kept for the call's pullback (``keeps_result``).  A call of a function assumed to write nothing first
    checks that it still is the function found so (``runtime.still_write_free``)."""
    op, v, a = ins.op, g.val(ins), [g.val(x) for x in ins.args]
    generic = ins.active and ins.op not in ("tuple", "list", "dict", "closure", "deref", "prim")
    copies, cuts = [], []
    if op == "call" and calls_write_free(ins, g.fn.pure):   # (the generated code relies on it)
        from . import runtime
        copies.append(f"{g.const(runtime.still_write_free)}({g.const(g.fn.purity)})")
    if generic and g.written and not _stores(ins):
        for k, x in enumerate(ins.args):
            if g.written.copied(ins, x) and not (k == 0 and (op == "call" or _may_view(ins))):
                c = f"_c{ins.id}_{k}"
                copies.append(f"{c} = _ad_snap({a[k]})")
                if op in ("call", "method", "rule"):
                    cuts.append(f"{v}, {g.pb(ins)} = _ad_cut({v}, {g.pb(ins)}, {c}, {a[k]})")
                a[k] = c
    kept = [f"_s{ins.id} = _ad_keep({v}, {g.pb(ins)})"] if keeps_result(g, ins) else []
    return copies + _statements(g, ins, op, v, a, generic) + cuts + kept


def keeps_result(g, ins) -> bool:
    """Whether the values of the arrays ``ins`` returns are kept for its pullback (``runtime.keep``): a call
    or an operation by a rule (not an inlined one) whose result code after it may write into (``y =
    np.exp(x); y *= 2``: the pullback of ``np.exp`` reads ``y``), that cannot return a view of its arguments
    or store them, and whose pullback may read values."""
    return bool(g.written) and ins.active and ins.op in _KEEPING and ins.kind not in (INT, NUM) \
        and not (ins.op in ("binop", "unary") and ins.kind != ANY) \
        and not _may_view(ins) and not _stores(ins) and _reads_values(ins) and g.written.result_written(ins)


_KEEPING = ("call", "rule", "method", "binop", "unary")


def _reads_values(ins) -> bool:
    """Whether the pullback of ``ins`` may read the values it was given or returned: all but those of the
    linear primitives and methods (``+``, ``np.sum``, ``x.copy()``); user code may."""
    op = ins.op
    if op == "rule":
        return not rules.linear_rule(ins.attr[0])
    if op == "method":
        return not rules.linear_method(ins.attr[0])
    if op in ("binop", "unary"):
        return ins.attr not in ("+", "-")
    f = ins.args[0].attr if isinstance(ins.args[0], Instr) and ins.args[0].op == "const" else None
    rule = rules.rule_of(f) if f is not None else None
    return rule is None or not rules.linear_rule(rule)


def _statements(g, ins, op, v, a, generic) -> list[str]:
    if op in ("param", "const"):
        return []
    if op == "global":
        return [f"{v} = {ins.attr}"]
    if op == "deref":
        return [f"{v} = _ad_deref(_self, {g.fn.freevars.index(ins.attr)})"]
    if op == "binop":
        if generic and ins.kind != ARR and (ins.kind == ANY or ins.attr not in rules.INLINE_BINOPS):
            return [f"{v}, {g.pb(ins)} = {g.const(rules.binop_rule(ins.attr))}({a[0]}, {a[1]})"]
        if ins.attr.endswith("="):   # in place (Python's semantics: the name is bound to the result)
            return [f"{v} = {a[0]}", f"{v} {ins.attr} {a[1]}"]
        return [f"{v} = {a[0]} {ins.attr} {a[1]}"]
    if op == "unary":
        if generic and (ins.kind == ANY or ins.attr not in rules.INLINE_UNARY):
            return [f"{v}, {g.pb(ins)} = {g.const(rules.unary_rule(ins.attr))}({a[0]})"]
        return [f"{v} = {ins.attr} {a[0]}" if ins.attr == "not" else f"{v} = {ins.attr}{a[0]}"]
    if op == "compare":
        return [f"{v} = {a[0]} {ins.attr} {a[1]}"]
    if op == "prim":
        return [f"{v} = {g.const(ins.attr[0])}({', '.join(a)})"]
    if op == "aprim":
        entry = rules.array_call(ins.attr[0])
        if entry.primal:
            return [f"{v} = {entry.primal.format(*a)}"]
        return [f"{v} = {g.const(ins.attr[0])}({', '.join(a)})"]
    if op == "rule":
        return [f"{v}, {g.pb(ins)} = {g.const(ins.attr[0])}({', '.join(a)})"]
    if op == "nondiff":
        return [f"{v} = {a[0]}({', '.join(a[1:])})"]
    if op == "call":
        kw = ins.attr
        if generic:
            given = list(zip(kw, ins.args[len(ins.args) - len(kw):]))
            if any(not x.active and x.kind != INT for _, x in given):
                # a value that is not a whole number carries no derivative here (data, a constant): the callee
                # may leave out its gradient (a kernel's adjoint in the others), ``runtime.Jkw_read``
                read = tuple(name for name, x in given if has_gradient(x))
                return [f"{v}, {g.pb(ins)} = _ad_Jkw_read({read!r}, {kw!r}, {', '.join(a)})"]
            if kw:
                return [f"{v}, {g.pb(ins)} = _ad_Jkw({kw!r}, {', '.join(a)})"]
            return [f"{v}, {g.pb(ins)} = _ad_J({', '.join(a)})"]
        return [f"{v} = {a[0]}({_call_args(a[1:], kw)})"]
    if op == "method":
        name, kw = ins.attr
        if generic:
            return [f"{v}, {g.pb(ins)} = _ad_Jm({name!r}, {kw!r}, {', '.join(a)})"]
        return [f"{v} = {a[0]}.{name}({_call_args(a[1:], kw)})"]
    if op in ("getattr", "setattr"):
        if generic or op == "setattr" and g.any_active:
            return [f"{v}, {g.pb(ins)} = _ad_{op}({a[0]}, {ins.attr!r}{''.join(', ' + x for x in a[1:])})"]
        return [f"{v} = {a[0]}.{ins.attr}"] if op == "getattr" else [f"{a[0]}.{ins.attr} = {a[1]}", f"{v} = None"]
    if op == "getitem" and ins.kind in (ARR, NUM) and ins.args[0].kind == ARR:   # x[i]: inlined
        return [f"{v} = {a[0]}[{a[1]}]"]
    if op in ("getitem", "setitem"):
        if generic or op == "setitem" and g.any_active:
            return [f"{v}, {g.pb(ins)} = _ad_{op}({', '.join(a)})"]
        return [f"{v} = {a[0]}[{a[1]}]"] if op == "getitem" else [f"{a[0]}[{a[1]}] = {a[2]}", f"{v} = None"]
    if op == "tuple":
        return [f"{v} = ({''.join(x + ', ' for x in a)})"]
    if op == "list":
        return [f"{v} = [{', '.join(a)}]"]
    if op == "dict":
        return [f"{v} = {{{', '.join(f'{k}: {x}' for k, x in zip(a[::2], a[1::2]))}}}"]
    if op == "slice":
        return [f"{v} = slice({', '.join(a)})"]
    if op == "closure":
        return [f"{v} = _ad_mk{ins.attr[0]}({', '.join(a)})"]
    raise AssertionError(op)


def _may_view(ins) -> bool:
    """Whether ``ins`` writes to its first argument or may return a view of it: copying that argument
    (copy on capture) would cut it off from the array it shares memory with."""
    op = ins.op
    if op in ("setitem", "getitem", "getattr") or op == "binop" and ins.attr.endswith("="):
        return True
    return op == "method" and rules.view_method(ins.attr[0]) \
        or op == "rule" and (rules.view_method(ins.attr[1]) or rules.writes(ins.attr[0]))


def _stores(ins) -> bool:
    """Whether ``ins`` stores its arguments in an object (``lst[i] = y``, ``o.a = y``, ``lst.append(y)``,
    ``setattr``): its pullback moves gradients by the box rules and never reads them, and a copy would cut
    the stored array off from the one the code writes later."""
    op = ins.op
    return op in ("setitem", "setattr") or op == "rule" and rules.writes(ins.attr[0]) \
        or op == "method" and rules.stores(ins.attr[0])


def _call_args(args, kw):
    pos = args[:len(args) - len(kw)]
    kws = [f"{k}={x}" for k, x in zip(kw, args[len(args) - len(kw):])]
    return ", ".join(pos + kws)


def source_line(lines: list[str], ins: Instr) -> list[str]:
    """``lines``, generated for ``ins``, each marked with the line of the user's source it came from
    (``emit.compile_function`` compiles the generated code against that line)."""
    return [f"{x}  # line {ins.line}" for x in lines] if ins.line else lines


def block(g, b) -> list[str]:
    """The statements of block ``b``: instructions, alpha pushes, and the terminator with its edges."""
    lines = []
    for ins in b.instrs:
        lines += source_line(instr(g, ins) + (g.vector_check(ins) if ins in g.derived else []), ins)
    need = g.needs.get(b)
    if need:
        lines.append(f"_t.append({_tuple(need)})")
    ret = f"_y = {g.val(b.term[1])}" if b.term[0] == "return" else ""
    return lines + terminator(g, b, lambda dst: edge(g, b, dst), ret)


def terminator(g, b, edge_to, ret: str) -> list[str]:
    """Block ``b``'s terminator: ``edge_to(dst)`` on each edge taken, ``ret`` at a return."""
    t = b.term
    if t[0] == "jump":
        return edge_to(t[1])
    if t[0] == "branch":
        return ([f"if {g.val(t[1])}:"] + ["    " + x for x in edge_to(t[2])] + ["else:"]
                + ["    " + x for x in edge_to(t[3])])
    if t[0] == "return":
        return [ret, "break"] if g.dispatch else [ret]
    return [f"raise {g.val(t[1])}"]


def edge(g, src, dst) -> list[str]:
    """Leaving ``src`` for ``dst``: the phi copies (one parallel assignment), the tag, the jump."""
    lines = []
    if dst.phis:
        names = ", ".join(g.val(p) for p in dst.phis)
        vals = ", ".join(g.val(p.incoming[src]) for p in dst.phis)
        lines.append(f"{names} = {vals}")
    if len(dst.preds) > 1:
        lines.append(f"_t.append({src.id})" if dst in g.loops else f"_T{dst.id} = {src.id}")
    lines += g.goto(src, dst, g.order)
    return lines


def _tuple(names):
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
