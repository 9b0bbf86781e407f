"""Forward mode: the SSA function (``lower``, ``analysis``) emitted once more, each instruction followed by
its tangent.  A tangent ``_f<n>`` is kept per active SSA value next to its primal ``_v<n>``; phi nodes
get tangent phis (the same parallel copies on each edge), so loops and branches need no stacks or tags:
the control flow is the primal's.

The tangent of an inlined primitive is written as an expression from the same derivative templates the
adjoint uses (``rules.scalar``, ``rules.numpy``): for an elementwise rule the partial derivative times
the argument's tangent in place of the incoming gradient, summed over the arguments.  Everything else
goes through ``tangent.JVP`` (forward rules, the transformed callee, or a reverse rule transposed).

The generated entry is ``_ad_jvp(f, tf, *args, *tangents) -> (y, ty)``; ``tf`` is the tangent of f
itself (a closure's captured variables, a ``SimpleNamespace``) and None, as for every tangent, is zero.
"""
from __future__ import annotations

import types

from . import rules
from .analysis import may_write, method_writes
from .emit import Gen, block_dispatch, exec_generated, factory_lines, param_instrs
from .ir import ARR, INT, NUM, Instr, has_gradient, spec_kind
from .primal import terminator
from .recorded import unshimmed
from .runtime import BUILD_LOCK
from .tangent import TRANSFORM

class ForwardGen(Gen):
    """The forward statements of a function: primal and tangent per instruction, tangent phis."""

    def __init__(self, fn):
        super().__init__(fn)
        # objects written to (``x[i] = v``, ``o.a = v``, ``lst.append``) get a tangent even when their
        # value is inactive (``np.zeros(3)``): the write may give them one
        self.tracked = {ins.args[0] for ins in fn.values() if isinstance(ins, Instr) and (
            ins.op in ("setitem", "setattr") or method_writes(ins))}

    def has_tangent(self, v) -> bool:
        if v in self.tracked:
            return not (isinstance(v, Instr) and v.op == "const")
        return has_gradient(v)

    def tan(self, v) -> str:
        """The tangent of ``v`` (``None`` when it has none)."""
        return f"_f{v.id}" if self.has_tangent(v) else "None"

    def dense(self, v) -> str:
        """The tangent of a number or array operand, a zero of its type where it has none."""
        t = self.tan(v)
        return f"_fw_zero({self.val(v)})" if t == "None" else t

    def template_sum(self, temps, ins) -> str:
        """The tangent ``sum_i d_i`` from templates written for a gradient ``{dy}``: each active
        argument's template with its tangent in place of ``{dy}``."""
        terms = self.fill_templates(temps, ins, self.val, lambda a: f"({self.tan(a)})",
                                    lambda a: self.tan(a) != "None" and a.kind != INT)
        return " + ".join(f"({x})" for _, _, x in terms) if terms else "None"

    # -- instructions -------------------------------------------------------------------------------------
    def instr(self, ins: Instr) -> list[str]:
        op, v, f = ins.op, self.val(ins), f"_f{ins.id}"
        a = [self.val(x) for x in ins.args]
        t = [self.tan(x) for x in ins.args]
        active = ins.active and ins.kind != INT
        if op in ("param", "const"):
            return []
        if op == "global":
            return [f"{v} = {ins.attr}"] + ([f"{f} = None"] if self.has_tangent(ins) else [])
        if op == "deref":
            i = self.fn.freevars.index(ins.attr)
            return [f"{v} = _ad_deref(_self, {i})", f"{f} = _ad_field(_tself, {ins.attr!r})"]
        if op in ("compare", "slice", "nondiff") or not active and op not in ("setitem", "setattr", "method"):
            return self.plain(ins, v, a) + ([f"{f} = None"] if self.has_tangent(ins) else [])
        if op == "binop" and ins.kind in (NUM, ARR) and (ins.attr in rules.INLINE_BINOPS or ins.attr == "@"):
            return [f"{v} = {a[0]} {ins.attr} {a[1]}", f"{f} = {self.binop_tangent(ins, v)}"]
        if op == "unary" and ins.kind in (NUM, ARR) and ins.attr in ("-", "+"):
            return [f"{v} = {ins.attr}{a[0]}", f"{f} = {ins.attr}{t[0]}"]
        if op == "prim":
            temps = rules.scalar_templates(op, ins.attr)
            return [f"{v} = {self.const(ins.attr[0])}({', '.join(a)})", f"{f} = {self.template_sum(temps, ins)}"]
        if op == "aprim":
            entry = rules.array_call(ins.attr[0])
            primal = entry.primal.format(*a) if entry.primal else f"{self.const(ins.attr[0])}({a[0]})"
            if entry.reduce:
                return [f"{v} = {primal}", f"{f} = {entry.tangent.format(*a, t=self.dense(ins.args[0]))}"]
            return [f"{v} = {primal}", f"{f} = {self.template_sum(entry.derivs, ins)}"]
        if op == "getitem" and ins.kind == ARR:
            return [f"{v} = {a[0]}[{a[1]}]", f"{f} = {self.dense(ins.args[0])}[{a[1]}]"]
        if op == "binop":
            return [f"{v}, {f} = _fw_J({self.const(rules.operator_function(ins.attr))}, None, ({a[0]}, {a[1]}), "
                    f"({t[0]}, {t[1]}))"]
        if op == "unary":
            return [f"{v}, {f} = _fw_unary({ins.attr!r}, {a[0]}, {t[0]})"]
        if op == "rule":
            fn = self.const(rules.owner(ins.attr[0]))
            return [f"{v}, {f} = _fw_J({fn}, None, {_tuple(a)}, {_tuple(t)})"] + self.rewritten(ins)
        if op == "call":
            kw = ins.attr
            if kw:
                return [f"{v}, {f} = _fw_Jkw({kw!r}, {a[0]}, {t[0]}, {_tuple(a[1:])}, {_tuple(t[1:])})"] \
                    + self.rewritten(ins)
            return [f"{v}, {f} = _fw_J({a[0]}, {t[0]}, {_tuple(a[1:])}, {_tuple(t[1:])})"] + self.rewritten(ins)
        if op == "method":
            name, kw = ins.attr
            return [f"{v}, {f} = _fw_Jm({name!r}, {kw!r}, {a[0]}, {t[0]}, {_tuple(a[1:])}, {_tuple(t[1:])})"] \
                + self.rewritten(ins)
        if op == "getitem":
            return [f"{v}, {f} = _fw_getitem({a[0]}, {t[0]}, {a[1]}, {t[1]})"]
        if op == "getattr":
            return [f"{v}, {f} = _fw_getattr({a[0]}, {t[0]}, {ins.attr!r})"]
        if op == "setitem":
            back = t[0] if t[0] != "None" else "_"
            return [f"{back} = _fw_setitem({a[0]}, {t[0]}, {a[1]}, {a[2]}, {t[2]})", f"{v} = {f} = None"]
        if op == "setattr":
            back = t[0] if t[0] != "None" else "_"
            return [f"{back} = _fw_setattr({a[0]}, {t[0]}, {ins.attr!r}, {a[1]}, {t[1]})", f"{v} = {f} = None"]
        if op == "tuple":
            return [f"{v} = {_tuple(a)}", f"{f} = {_tuple(t)}"]
        if op == "list":
            return [f"{v} = [{', '.join(a)}]", f"{f} = [{', '.join(t)}]"]
        if op == "dict":
            return [f"{v} = {{{', '.join(f'{k}: {x}' for k, x in zip(a[::2], a[1::2]))}}}",
                    f"{f} = {{{', '.join(f'{k}: {x}' for k, x in zip(a[::2], t[1::2]))}}}"]
        if op == "closure":
            index, names, rec = ins.attr
            return [f"{v} = _ad_mk{index}({', '.join(a)})", f"{f} = _fw_closure({names!r}, {_tuple(t)}, {rec!r})"]
        raise AssertionError(op)

    def rewritten(self, ins) -> list[str]:
        """After a call that may write into its arguments (``np.put(y, ...)``, ``np.add.at(y, ...)``, ``out=y``, a
        method that writes, its object or a ufunc's ``.at``): the tangent of each of them that had none before
        (``np.zeros``), the one its writes registered (``tangent_of``); one it had, they wrote into."""
        op = ins.op
        if not (op == "call" and may_write(ins, self.fn.pure) or method_writes(ins)
                or op == "rule" and rules.writes(ins.attr[0])):
            return []
        args = ins.args[1:] if op == "call" else ins.args
        return [f"{self.tan(x)} = _fw_tan({self.val(x)}, {self.tan(x)})" for x in dict.fromkeys(args)
                if self.tan(x) != "None" and not (isinstance(x, Instr) and x.op == "const")]

    def plain(self, ins, v, a) -> list[str]:
        """The primal statement of an instruction without tangent."""
        op = ins.op
        if op == "compare":
            return [f"{v} = {a[0]} {ins.attr} {a[1]}"]
        if op == "slice":
            return [f"{v} = slice({', '.join(a)})"]
        if op == "nondiff":
            return [f"{v} = {a[0]}({', '.join(a[1:])})"]
        if op == "binop":
            return [f"{v} = {a[0]} {ins.attr} {a[1]}"]
        if op == "unary":
            return [f"{v} = {ins.attr} {a[0]}" if ins.attr == "not" else f"{v} = {ins.attr}{a[0]}"]
        if op == "prim":
            return [f"{v} = {self.const(ins.attr[0])}({', '.join(a)})"]
        if op == "aprim":
            entry = rules.array_call(ins.attr[0])
            return [f"{v} = {entry.primal.format(*a) if entry.primal else self.const(ins.attr[0]) + '(' + a[0] + ')'}"]
        if op == "rule":
            return [f"{v} = {self.const(rules.owner(ins.attr[0]))}({', '.join(a)})"]
        if op == "call":
            return [f"{v} = {a[0]}({_call_args(a[1:], ins.attr)})"]
        if op == "getitem":
            return [f"{v} = {a[0]}[{a[1]}]"]
        if op == "getattr":
            return [f"{v} = {a[0]}.{ins.attr}"]
        if op == "tuple":
            return [f"{v} = {_tuple(a)}"]
        if op == "list":
            return [f"{v} = [{', '.join(a)}]"]
        if op == "dict":
            return [f"{v} = {{{', '.join(f'{k}: {x}' for k, x in zip(a[::2], a[1::2]))}}}"]
        if op == "closure":
            return [f"{v} = _ad_mk{ins.attr[0]}({', '.join(a)})"]
        raise AssertionError(op)

    def binop_tangent(self, ins, y) -> str:
        """``d(a op b)`` for numbers and arrays, from the gradient templates; ``@`` is bilinear."""
        a, b = ins.args
        if ins.attr == "@":
            terms = []
            if self.tan(a) != "None":
                terms.append(f"{self.tan(a)} @ {self.val(b)}")
            if self.tan(b) != "None":
                terms.append(f"{self.val(a)} @ {self.tan(b)}")
            return " + ".join(terms)
        temps = rules.ARRAY_BINOPS[ins.attr] if ins.kind == ARR else rules.scalar_templates("binop", ins.attr)
        expr = self.template_sum(temps, ins)
        if ins.kind != ARR:
            return expr
        # the template {dy} alone (x + c, x - c) is an argument's tangent itself: copied, to be y's own
        alone = [t for t, x in zip(temps, ins.args) if self.tan(x) != "None" and x.kind != INT] == ["{dy}"]
        return f"{'_fw_fresh' if alone else '_fw_fit'}({expr}, {y})"

    # -- blocks -------------------------------------------------------------------------------------------
    def block(self, b) -> list[str]:
        lines = []
        for ins in b.instrs:
            lines += self.instr(ins)
        ret = f"_y, _fy = {self.val(b.term[1])}, {self.tan(b.term[1])}" if b.term[0] == "return" else ""
        return lines + terminator(self, b, lambda dst: self.edge(b, dst), ret)

    def edge(self, src, dst) -> list[str]:
        """The phi copies, primal and tangent in one parallel assignment, and the jump."""
        names, vals = [], []
        for p in dst.phis:
            u = p.incoming[src]
            names.append(self.val(p))
            vals.append(self.val(u))
            if self.has_tangent(p):
                names.append(f"_f{p.id}")
                vals.append(self.dense(u) if p.kind in (NUM, ARR) else self.tan(u))
        lines = [f"{', '.join(names)} = {', '.join(vals)}"] if names else []
        return lines + self.goto(src, dst, self.order)

    def prologue(self) -> list[str]:
        out = []
        for p in param_instrs(self.fn):
            if not p.active or p.kind == INT:
                continue
            if p.kind in (NUM, ARR):
                out.append(f"if _f{p.id} is None: _f{p.id} = _fw_zero(_v{p.id})")
            else:
                out.append(f"_f{p.id} = _fw_tan(_v{p.id}, _f{p.id})")
        return out


def _tuple(names) -> str:
    return f"({''.join(x + ', ' for x in names)})"


def _call_args(args, kw):
    pos = args[:len(args) - len(kw)]
    return ", ".join(pos + [f"{k}={x}" for k, x in zip(kw, args[len(args) - len(kw):])])


def generate(fn) -> tuple[str, dict]:
    """The source text of the factory of ``_ad_jvp`` and the names it binds."""
    g = ForwardGen(fn)
    ps = param_instrs(fn)
    params = ", ".join(["_self", "_tself"] + [f"_v{p.id}" for p in ps] + [f"_f{p.id}" for p in ps])
    bodies = {b: g.block(b) for b in g.order}
    body = g.prologue() + [x.replace("        ", "", 0) for x in block_dispatch(g.order, bodies, "")]
    body.append("return _y, _fw_tan(_y, _fy)")
    lines = []
    for i, node in enumerate(fn.factory_nodes):
        captured = next(ins.attr[1] for ins in fn.values() if isinstance(ins, Instr) and ins.op == "closure"
                        and ins.attr[0] == i)
        lines += factory_lines(i, node, captured)
    lines.append("def _ad_factory(_ad_env):")
    helpers = _helpers()
    used = {name for name in helpers if any(name in x for x in body)}
    mks = {f"_ad_mk{i}" for i in range(len(fn.factory_nodes))}
    lines += [f"    {name} = _ad_env[{name!r}]" for name in sorted(used | set(g.env) | mks)]
    lines.append(f"    def _ad_jvp({params}):")
    lines += ["        " + x for x in body]
    lines.append("    return _ad_jvp")
    return "\n".join(lines) + "\n", g.env


# -- specialisations ---------------------------------------------------------------------------------------
_JVPS: dict = {}   # (id(code), kinds) -> (code, entry)


@TRANSFORM.provide
def specialised_jvp(f: types.FunctionType, args):
    """The compiled forward entry of ``f`` for the kinds of ``args`` (transformed on first use); for a
    function made by ``ad.grad``, its specialisation's ``jvp``; of a copy that a recording reads its globals
    through, the function's."""
    f = unshimmed(f)
    kinds = tuple(map(spec_kind, args))
    code = f.__code__
    key = (id(code), kinds)
    hit = _JVPS.get(key)
    if hit is None or hit[0] is not code:
        from .api import made_by_grad, refuse_made, specialised
        if made_by_grad(f) or hasattr(f, "__ad_code__"):
            return specialised(f, args).jvp
        refuse_made(f)
        with BUILD_LOCK:
            hit = _JVPS[key] = (code, _build(f, kinds))
    return hit[1]



def _build(f, kinds):
    from .api import analysed_ir
    fn, filename, text = analysed_ir(f, kinds)
    src, env = generate(fn)
    ns = exec_generated(src, fn, f.__globals__, f"jvp {f.__qualname__}", filename, text, env, _helpers(),
                        user=f.__qualname__)
    return ns["_ad_factory"](env)


def _helpers() -> dict:
    """The names generated forward code may bind: the reverse helpers its templates use, and its own."""
    from . import runtime
    return {**runtime.HELPERS, **_jvp_rules.HELPERS}


from .rules import jvp as _jvp_rules  # noqa: E402  (registers the forward rules; needs the names above)
