"""The adjoint: the primal CFG mirrored.  Each block's adjoint runs its instructions backwards: a gradient
``_d<n>`` is kept per SSA value, the pullback of a call is applied to it, and its results are added to
the gradients of the arguments (inlined scalar rules write the derivative expression directly).  A block
that runs more than once first pops the alphas it pushed; a join pops (or reads) its branch tag and sends
each phi's gradient to the incoming value of the predecessor that was taken, then continues in that
predecessor's adjoint.  Gradients of values that are mutable (lists, dicts, objects, arrays that were
mutated) are routed through the box store at run time (``runtime.acc_into`` / ``runtime.take``).
"""
from __future__ import annotations

from . import rules
from .ir import ANY, ARR, INT, NUM, Instr, has_gradient
from .primal import keeps_result, source_line

# (an augmented assignment ``x op= y`` and a rule that writes may write to their argument: their pullback runs
# even without a gradient of the result)
_PURE = {"binop", "unary", "prim", "rule", "getattr", "getitem", "tuple", "list", "dict", "closure", "deref"}


def _sliced(ins) -> bool:
    """``x[a:b]``: a new list for a list (a view of an array, whose gradient ``take`` hands back to it)."""
    return ins.op == "getitem" and isinstance(ins.args[1], Instr) and ins.args[1].op == "slice"


class BlockAdjoint:
    """Builds the adjoint statements of one block, recording which primal values it reads (alphas)."""

    def __init__(self, g, block, seed=None):
        self.g, self.b = g, block
        self.seed = seed   # the value that the exit's ``_dy`` is the gradient of (None: the returned value)
        self.loop = block in g.loops
        self.need: list[str] = []
        self.lines: list[str] = []

    # -- naming -------------------------------------------------------------------------------------------
    def ref(self, v) -> str:
        """The name of primal value ``v`` as seen from this block's adjoint; an entry ``x[i]`` of a vector
        argument read in a loop is read again (the arrays of a box-free function do not change) instead
        of being stored."""
        if isinstance(v, Instr) and v.op == "const":
            return self.g.val(v)
        if isinstance(v, Instr) and v.op == "getitem" and v.kind == NUM and self.loop:
            return f"{self.ref(v.args[0])}[{self.ref(v.args[1])}]"
        return self._alpha(self.g.val(v), v)

    def pbref(self, ins) -> str:
        return self._alpha(self.g.pb(ins), ins)

    def _alpha(self, name, v):
        if self.loop and self.g.defblock[v] in self.g.loops:
            if name not in self.need:
                self.need.append(name)
            return "_a" + name[1:]
        return name

    def zero(self, v) -> str:
        return "0" if v.kind == NUM else "None"

    # -- accumulation -------------------------------------------------------------------------------------
    def add(self, v, expr: str, maybe_none: bool):
        """``v``'s gradient += expr."""
        if not has_gradient(v):
            return
        d = f"_d{v.id}"
        if v.kind == NUM:
            self.lines.append(f"{d} = _ad_addn({d}, {expr})" if maybe_none else f"{d} += {expr}")
        elif v.kind == ARR and self.g.boxfree:
            # no boxes can exist for this function's arrays while it runs: a local variable holds the gradient
            # (summed by a helper, which forward over reverse differentiates as a sum, also of indexed
            # cotangents); so does the gradient its pullback is given for an array it returned that the
            # caller made a box afterwards (the caller took that gradient out of the store)
            self.lines.append(f"{d} = _ad_acc({d}, {expr})")
        else:
            self.lines.append(f"{d} = _ad_acci({self.ref(v)}, {d}, {expr})")

    def dy(self, ins) -> str:
        """The gradient of ``ins`` at its definition, fetched once into ``_dy<n>`` (box-aware: an object
        read out of a cell, a container or an attribute was made elsewhere, so it leaves its box's
        gradient in the store, for the code that made the box; a slice of a list is a list made here)."""
        d = f"_d{ins.id}"
        if ins in self.g.derived:   # a vector it made: the gradients of its entries read (``_entry``) join
            self.lines.append(f"{d} = _ad_withents({d}, {self.ref(ins)}, _i{ins.id}, _g{ins.id})")
            if self.loop:
                self.lines.append(f"_i{ins.id}, _g{ins.id} = _ad_ents()")
        if ins.kind == ANY or ins.kind == ARR and (not self.g.boxfree or ins in self.g.escaping):
            read = ins.op == "deref" or ins.op in ("getitem", "getattr") and ins.kind == ANY and not _sliced(ins)
            made = ins.op == "rule" and rules.made_by_primitive(ins.attr[0])   # (its items' too: runtime.take_items)
            v = self.ref(ins)
            if read and ins.op == "getitem":   # (an item of a container, or an array the read made: ``held``)
                self.lines.append(f"_e = _ad_takef({v}, {d}) if _ad_held({v}, {self.ref(ins.args[0])}) "
                                  f"else _ad_take({v}, {d})")
            else:
                take = "_ad_takef" if read else "_ad_takei" if made else "_ad_take"
                self.lines.append(f"_e = {take}({v}, {d})")
        else:
            self.lines.append(f"_e = {d}")
        if self.loop:
            self.lines.append(f"{d} = {self.zero(ins)}")
        return "_e"

    # -- instructions -------------------------------------------------------------------------------------
    def instr(self, ins: Instr):
        if not ins.active or ins.op in ("param", "const", "global", "compare", "slice"):
            return
        if ins.op == "nondiff":   # (no derivative: what was added into its gradient goes nowhere; in a loop it is
            if self.loop and has_gradient(ins):   # dropped here, so the pass before does not find it added to)
                self.lines.append(f"_d{ins.id} = {self.zero(ins)}")
            return
        g, op = self.g, ins.op
        if op == "aprim" or op in ("binop", "unary", "getitem") and ins.kind == ARR:
            self._inline_array(ins)
            return
        if op == "getitem" and ins.kind == NUM and ins.args[0].kind == ARR:
            self._entry(ins)
            return
        if op == "prim" or op in ("binop", "unary") and self._inlined(ins):
            self._inline(ins)
            return
        start = len(self.lines)
        e = self.dy(ins)
        body_start = len(self.lines)
        if op == "deref":
            i = g.fn.freevars.index(ins.attr)
            self.lines.append(f"_dF{i} = _ad_acc(_dF{i}, {e})")
        elif op == "tuple" or op == "list":
            for i, a in enumerate(ins.args):
                self.add(a, f"{e}[{i}]", True)
        elif op == "dict":
            for k, a in zip(ins.args[::2], ins.args[1::2]):
                self.add(a, f"_ad_item({e}, {self.ref(k)})", True)
        elif op == "closure":
            if ins.attr[2] is not None:  # a recursive nested function: its gradient nests in itself
                self.lines.append(f"{e} = _ad_fold({e}, {ins.attr[2]!r})")
            for name, a in zip(ins.attr[1], ins.args):
                self.add(a, f"_ad_field({e}, {name!r})", True)
        else:
            if keeps_result(g, ins):   # (its pullback runs on the values it made, not on those written since)
                self.lines.append(f"_g = _ad_kept({self._alpha(f'_s{ins.id}', ins)}, {self.pbref(ins)}, {e})")
            else:
                self.lines.append(f"_g = {self.pbref(ins)}({e})")
            for i, a in enumerate(ins.args):
                self.add(a, f"_g[{i}]", True)
        if ins.kind != NUM and op in _PURE and not (op == "binop" and ins.attr.endswith("=")
                                                     or op == "rule" and rules.writes(ins.attr[0])):
            body = self.lines[body_start:]
            if not body:
                del self.lines[start:]
                return
            self.lines[body_start:] = [f"if {e} is not None:"] + ["    " + x for x in body]

    def _inlined(self, ins):
        tbl = rules.INLINE_BINOPS if ins.op == "binop" else rules.INLINE_UNARY
        return ins.kind in (INT, NUM) and ins.attr in tbl

    def _inline(self, ins):
        temps = rules.scalar_templates(ins.op, ins.attr)
        e = self.dy(ins)
        for _, a, expr in self.g.fill_templates(temps, ins, self.ref, e, lambda a: a.active and a.kind != INT):
            self.add(a, expr, False)

    def _entry(self, ins):
        """``x[i]``, a number read from a vector (box-free functions only): a float gradient (or an int one,
        ``s = s + x[k]`` seeded with ``dy = 1``) is appended with its index to ``x``'s entries
        (``cotangent.entries``), another added to ``x``'s gradient as an indexed cotangent."""
        x, i = ins.args
        e, n, xi = self.dy(ins), x.id, self.ref(i)
        self.lines += [f"if type({e}) is _ad_f64 or type({e}) is float or type({e}) is int:",
                       f"    _i{n}.append({xi})", f"    _g{n}.append({e})",
                       "else:", f"    _d{n} = _ad_addat(_d{n}, {self.ref(x)}, {xi}, {e})"]

    def _inline_array(self, ins):
        """An inlined NumPy rule (``rules.numpy.ARRAY_INLINE``/``ARRAY_BINOPS``): the gradients written as
        expressions; an operand that is a number gets the sum over the array (``*_REDUCED``), an array
        operand of an array-array operation is un-broadcast (a no-op when the shapes match)."""
        if ins.op == "aprim":
            temps = [rules.array_call(ins.attr[0]).derivs[0]]
        elif ins.op == "getitem":
            temps = [rules.ARRAY_GETITEM, ""]
        elif ins.op == "binop":
            temps = list(rules.ARRAY_BINOPS[ins.attr])
            for i, a in enumerate(ins.args):
                if a.kind != ARR:
                    temps[i] = rules.ARRAY_BINOPS_REDUCED[ins.attr][i]
        else:
            temps = ["-{dy}" if ins.attr == "-" else "{dy}"]
        start = len(self.lines)
        e = self.dy(ins)
        body_start = len(self.lines)
        both = ins.op == "binop" and ins.attr != "@" and all(a.kind == ARR for a in ins.args)
        for _, a, expr in self.g.fill_templates(temps, ins, self.ref, e, has_gradient):
            if both:
                expr = f"_ad_unb({expr}, {self.ref(a)})"
            self.add(a, expr, False)
        if ins.kind != NUM:
            body = self.lines[body_start:]
            if not body:
                del self.lines[start:]
                return
            self.lines[body_start:] = [f"if {e} is not None:"] + ["    " + x for x in body]

    # -- the block ----------------------------------------------------------------------------------------
    def build(self, mode: str) -> list[str]:
        b, g = self.b, self.g
        if b is g.fn.exit:
            rv = b.term[1] if self.seed is None else self.seed
            self.add(rv, "_dy", mode != "pop")   # the fused gradient entries seed _dy = 1
        for ins in reversed(b.instrs):
            start = len(self.lines)
            self.instr(ins)
            self.lines[start:] = source_line(self.lines[start:], ins)
        self.lines += self.leave(mode)
        head = []
        if self.need:
            names = ", ".join("_a" + n[1:] for n in self.need)
            head = [f"{names} = _t.pop()"] if mode == "pop" else ["_i -= 1", f"{names} = _t[_i]"]
        return head + self.lines

    def leave(self, mode: str) -> list[str]:
        """Phi gradients to the predecessor that was taken, and the jump to its adjoint."""
        b, g = self.b, self.g
        if b is g.fn.blocks[0]:
            return ["break"] if g.dispatch else []
        if len(b.preds) == 1:
            return g.goto_adj(b, b.preds[0])
        out = []
        if b in g.loops:
            out += ["_i -= 1", "_tag = _t[_i]"] if mode == "index" else ["_tag = _t.pop()"]
        else:
            out.append(f"_tag = _T{b.id}")
        active = [p for p in b.phis if p.active]
        snap = []
        if self.loop and active:
            snap = [f"_x{p.id} = _d{p.id}" for p in active] + [f"_d{p.id} = {self.zero(p)}" for p in active]
        for k, pred in enumerate(b.preds):
            arm = []
            for p in active:
                src = f"_x{p.id}" if snap else f"_d{p.id}"
                u = p.incoming[pred]
                if has_gradient(u):
                    d = f"_d{u.id}"
                    if u.kind == NUM:
                        arm.append(f"{d} = _ad_addn({d}, {src})" if p.kind != NUM else f"{d} += {src}")
                    else:
                        arm.append(f"{d} = _ad_acci({self.ref(p)}, {d}, {src})")
            arm += g.goto_adj(b, pred)
            if k == len(b.preds) - 1:
                out.append("else:")
            else:
                out.append(f"{'if' if k == 0 else 'elif'} _tag == {pred.id}:")
            out += ["    " + x for x in arm]
        return snap + out
