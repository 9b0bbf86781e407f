"""SSA construction by Braun et al., "Simple and Efficient Construction of Static Single Assignment Form"
(CC 2013): variables are read and written per block while the CFG is being built; a block is *sealed*
once all its predecessors are known, and phi nodes are placed lazily and removed again when trivial.
"""
from __future__ import annotations

from .ir import Block, Function, Instr, Phi, Value

UNDEFINED = type("Undefined", (), {"__repr__": lambda self: "<undefined>"})()


def resolve(v: Value) -> Value:
    """Follow removed (trivial) phis to the value that replaced them."""
    while isinstance(v, Phi) and v.replaced is not None:
        v = v.replaced
    return v


class SSABuilder:
    """Variable bookkeeping for one function under construction."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.defs: dict[str, dict[Block, Value]] = {}
        self.sealed: set[Block] = set()
        self.incomplete: dict[Block, dict[str, Phi]] = {}
        self.counter = 0
        self.undef: Instr | None = None

    def new_id(self) -> int:
        self.counter += 1
        return self.counter

    def new_block(self) -> Block:
        b = Block(len(self.fn.blocks))
        self.fn.blocks.append(b)
        return b

    # -- variables -------------------------------------------------------------------------------------
    def write(self, var: str, block: Block, value: Value) -> None:
        self.defs.setdefault(var, {})[block] = value

    def read(self, var: str, block: Block) -> Value:
        found = self.defs.get(var, {}).get(block)
        if found is not None:
            return resolve(found)
        return self._read_recursive(var, block)

    def _read_recursive(self, var: str, block: Block) -> Value:
        if block not in self.sealed:
            val = self._new_phi(block, var)
            self.incomplete.setdefault(block, {})[var] = val
        elif len(block.preds) == 1:
            val = self.read(var, block.preds[0])
        elif not block.preds:
            val = self._undefined()
        else:
            phi = self._new_phi(block, var)
            self.write(var, block, phi)
            val = self._add_operands(var, phi)
        self.write(var, block, val)
        return val

    def _new_phi(self, block: Block, var: str) -> Phi:
        phi = Phi(self.new_id(), block, var)
        block.phis.append(phi)
        return phi

    def _undefined(self) -> Instr:
        if self.undef is None:
            self.undef = Instr(self.new_id(), "const", attr=UNDEFINED)
            self.fn.blocks[0].instrs.insert(0, self.undef)
        return self.undef

    def _add_operands(self, var: str, phi: Phi) -> Value:
        for pred in phi.block.preds:
            v = self.read(var, pred)
            phi.incoming[pred] = v
            if isinstance(v, Phi):
                v.users.append(phi)
        return self._try_remove_trivial(phi)

    def _try_remove_trivial(self, phi: Phi) -> Value:
        same = None
        for op in phi.incoming.values():
            op = resolve(op)
            if op is same or op is phi:
                continue
            if same is not None:
                return phi
            same = op
        if same is None:
            same = self._undefined()
        phi.replaced = same
        if isinstance(same, Phi):
            same.users.extend(u for u in phi.users if u is not phi)
        for user in phi.users:
            if user is not phi and user.replaced is None:
                self._try_remove_trivial(user)
        return same

    def seal(self, block: Block) -> None:
        for var, phi in self.incomplete.pop(block, {}).items():
            self._add_operands(var, phi)
        self.sealed.add(block)

    # -- finishing -------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Drop removed phis and unreachable blocks, resolve every operand, renumber blocks."""
        fn = self.fn
        reachable, todo = {fn.blocks[0], fn.exit}, [fn.blocks[0]]
        while todo:
            for s in todo.pop().succs:
                if s not in reachable:
                    reachable.add(s)
                    todo.append(s)
        fn.blocks = [b for b in fn.blocks if b in reachable]
        for b in fn.blocks:
            b.preds = [p for p in b.preds if p in reachable]
        changed = True
        while changed:
            changed = False
            for b in fn.blocks:
                for p in b.phis:
                    if p.replaced is None:
                        vals = {resolve(p.incoming[pred]) for pred in b.preds} - {p}
                        if len(vals) <= 1:
                            p.replaced = vals.pop() if vals else self._undefined()
                            changed = True
        for b in fn.blocks:
            b.phis = [p for p in b.phis if p.replaced is None]
            for p in b.phis:
                p.incoming = {pred: resolve(p.incoming[pred]) for pred in b.preds}
            for ins in b.instrs:
                ins.args = [resolve(a) for a in ins.args]
            t = b.term
            if t[0] == "branch":
                b.term = ("branch", resolve(t[1]), t[2], t[3])
            elif t[0] in ("return", "raise"):
                b.term = (t[0], resolve(t[1]))
        merge_blocks(fn)
        for i, b in enumerate(fn.blocks):
            b.id = i + 1


def merge_blocks(fn: Function) -> None:
    """Fold a block into its predecessor when that is its only predecessor and jumps straight to it."""
    changed = True
    while changed:
        changed = False
        for b in fn.blocks:
            t = b.term
            if t[0] != "jump":
                continue
            s = t[1]
            if s is b or len(s.preds) != 1 or s is fn.blocks[0]:
                continue
            assert not s.phis
            b.instrs.extend(s.instrs)
            b.term = s.term
            for succ in s.succs:
                succ.preds = [b if p is s else p for p in succ.preds]
                for phi in succ.phis:
                    phi.incoming = {(b if k is s else k): v for k, v in phi.incoming.items()}
            if fn.exit is s:
                fn.exit = b
            fn.blocks.remove(s)
            changed = True
            break
