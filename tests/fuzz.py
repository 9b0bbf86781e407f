"""A differential fuzzer: random program text shaped by the grammar, run through parse -> evaluate ->
compile -> grad, where every outcome must be the same in the reference evaluator and in a compiled
kernel: equal values, or the same ``TensorLangError`` class.

Where ``tests/strategies.py`` builds well-typed programs node by node for the passes' property tests,
this writes source text with what those avoid: huge and negative constants (2^64 and beyond, 1e308),
extents that are 0, 1 or negative at the given sizes (``n - 3`` at n = 0), names that clash with C
(``M_PI``, ``INFINITY``, ``linux``, ``_Bool``, ``tl_x``), NaN and infinite inputs, dense and CSR
relations, and deep nesting.  Every access is guarded so that it is in range, so a program that does not
parse is a defect of the generator, and is counted.

The comparison is the contract of docs/reliability.md, no looser: where every input and every value the
program computes as written is finite (``finite_throughout``, asked of the element-by-element
interpreter of ``tests/interpreter.py``), the two paths give equal values to rounding or the same error.
Where some value is infinite or NaN, the rewrites (exact over the reals, not in IEEE arithmetic) may
combine it differently: the run must still give a value (of the same shape) or the same error in both,
and a difference is counted apart (``nonfinite_differing``), not as a mismatch.  Where the evaluator
refuses a program nested deeper than NumPy's axes (its documented limit) and a kernel computes it, the
run is counted as ``unchecked``.  A program that takes longer than the time limit (60 s by default) is
recorded as slow, and is a failure like a mismatch.

The draws are a function of the seed alone.  ``run(seed, count)`` returns a ``Report``; from the command
line, ``python tests/fuzz.py --seconds 600 --seed 1`` runs until the time is up and prints the figures
(docs/reliability.md records the last long run); it exits 1 on a mismatch or a slow program.
"""
from __future__ import annotations

import argparse
import random
import signal
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

import tensorlang as tl
from tensorlang.nodes import R

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py, or run as a script)
    from interpreter import Violation, naive_evaluate
    from oracles import close
except ImportError:  # tests/ as a package
    from tests.interpreter import Violation, naive_evaluate
    from tests.oracles import close

# names that are C keywords, macros of the C library, predefined macros or the kernels' own prefix
VALUE_NAMES = ("x", "y", "M_PI", "INFINITY", "NAN", "linux", "unix", "INT64_MAX", "_Bool", "tl_x", "int",
               "main", "errno", "EOF", "real", "double", "sizes", "acc", "i0", "stdin", "NULL")
SIZE_NAMES = ("n", "m", "tl_n", "INT64_MIN", "k2", "size_t", "M_E", "CHAR_BIT", "RAND_MAX", "__LINE__")
INDEX_NAMES = ("i", "j", "k", "tl_i", "for", "if", "M_SQRT2", "stdout")
CONSTANTS = ("0", "1", "2", "0.5", "-3", "1e-3", "7.25", "18446744073709551616", "18446744073709551617",
             "99999999999999999999", "9223372036854775807", "1e308", "1e999", "0.0")
HUGE = ("9223372036854775807", "18446744073709551617", "99999999999999999999999")
FUNCTIONS = ("relu", "max", "min", "abs", "tanh", "exp", "sigmoid", "sqrt", "log", "sin")


@dataclass
class Report:
    """What a run found: counts by outcome and the first mismatches (source, inputs, both outcomes)."""

    programs: int = 0
    parsed: int = 0
    runs: int = 0  # evaluator-vs-kernel comparisons (primal and gradient, each at several sizes)
    agreed_values: int = 0
    agreed_errors: int = 0
    disagreed: int = 0  # runs whose outcomes differ (the first 20 are kept in ``mismatches``)
    nonfinite_runs: int = 0  # runs where an input or a value computed on the way is infinite or NaN
    nonfinite_differing: int = 0  # of those, runs whose values differ (allowed: the module docstring)
    unchecked: int = 0  # runs the evaluator refuses as nested too deep, where a kernel computes
    gradients: int = 0
    not_parsed: list = field(default_factory=list)
    mismatches: list = field(default_factory=list)
    slow: list = field(default_factory=list)  # programs that took longer than the limit: (source, stage)
    seconds: float = 0.0

    def __str__(self) -> str:
        return (f"{self.programs} programs, {self.parsed} parsed; {self.gradients} gradients; {self.runs} runs: "
                f"{self.agreed_values} equal values, {self.agreed_errors} same error, "
                f"{self.nonfinite_differing} differing with a non-finite value on the way (of "
                f"{self.nonfinite_runs} such runs), {self.unchecked} too deep for the evaluator, "
                f"{self.disagreed} mismatches, {len(self.slow)} over the time limit; {self.seconds:.0f} s")


class Generator:
    """Random program text from one ``random.Random``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def program(self) -> tuple[str, dict]:
        """``(source, declarations)``: declarations map a name to ``("R",)``, ``("vec", s)``,
        ``("mat", s, t)`` or ``("rel", s, t)``."""
        rng = self.rng
        sizes = rng.sample(SIZE_NAMES, 2)
        names = rng.sample(VALUE_NAMES, 4)
        self.s, self.t = sizes
        self.decls = {
            names[0]: ("R",),
            names[1]: ("vec", self.extent_of_input(self.s)),
            names[2]: ("mat", self.s, self.t),
        }
        if self.chance(0.5):
            self.decls[names[3]] = ("rel", self.s, self.t)
        self.index_pool = list(INDEX_NAMES)
        rng.shuffle(self.index_pool)
        self.bound: list[tuple[str, str]] = []  # index variables in scope, with their extents
        self.lets: list[str] = []
        depth = 6 if self.chance(0.15) else 3
        body = self.deep(self.scalar(depth)) if self.chance(0.1) else self.scalar(depth)
        if self.chance(0.3):  # a tensor output
            v = self.fresh_index()
            ext = self.extent()
            self.bound.append((v, ext))
            body = f"gen({v}:{ext}) {self.scalar(2)}"
            self.bound.pop()
        lines = [f"{n} : {self.type_text(d)}" for n, d in self.decls.items()]
        return "\n".join(lines + [body]), self.decls

    def type_text(self, d) -> str:
        if d[0] == "rel":
            return f"rel[{d[1]}, {d[2]}]"
        return "".join(f"[{s}]" for s in d[1:]) + "R"

    def extent_of_input(self, s: str) -> str:
        return self.pick((s, s, f"{s} + 1", f"2*{s}"))

    def extent(self) -> str:
        s, t = self.s, self.t
        return self.pick((s, t, f"{s} - 1", f"{s} - 3", f"{t} - {s}", f"{s} + 1", "1", "0", f"2*{s}", "2"))

    def fresh_index(self) -> str:
        used = {v for v, _ in self.bound}
        for name in self.index_pool:
            if name not in used:
                return name
        return f"q{len(used)}"

    def deep(self, e: str) -> str:
        """Deep nesting: parentheses, lets and loops of extent 1 around ``e`` (at most 50 loops: the
        evaluator holds an array axis per loop, and NumPy has 64)."""
        kind = self.pick(("paren", "let", "sum"))
        depth = self.rng.randrange(20, 50 if kind == "sum" else 150)
        if kind == "paren":
            return "(" * depth + e + ")" * depth
        if kind == "let":
            lets = "".join(f"let d{k} = {k} in " for k in range(depth))
            return lets + f"{e} + d{depth - 1}"
        return "".join(f"sum(z{k}:1) " for k in range(depth)) + f"({e})"

    def affine(self) -> str:
        """An index expression over the bound variables, sizes and constants (possibly huge)."""
        parts = []
        if self.bound:
            v, _ = self.pick(self.bound)
            parts.append(self.pick((v, f"2*{v}", f"-{v}", v)))
        if self.chance(0.4):
            parts.append(self.pick((self.s, self.t, "1", "3")))
        if self.chance(0.1):
            parts.append(self.pick(HUGE))
        return " + ".join(parts) if parts else self.pick(("0", "1", self.s))

    def pred(self) -> str:
        rng = self.rng
        kind = rng.random()
        rels = [n for n, d in self.decls.items() if d[0] == "rel"]
        if rels and kind < 0.25 and len(self.bound) >= 1:
            a = self.affine()
            b = self.affine()
            rel = rels[0]
            _, s, t = self.decls[rel]
            return f"0 <= {a} < {s} and 0 <= {b} < {t} and {rel}({a}, {b})"
        cmp = self.pick(("<", "<=", "=", "!=", ">", ">="))
        p = f"{self.affine()} {cmp} {self.affine()}"
        if self.chance(0.2):
            p = f"{p} {self.pick(('and', 'or'))} {self.affine()} < {self.affine()}"
        if self.chance(0.1):
            p = f"not ({p})" if " and " not in p and " or " not in p else p
        return p

    def access(self) -> str:
        vectors = [(n, d) for n, d in self.decls.items() if d[0] in ("vec", "mat")]
        name, d = self.pick(vectors)
        if d[0] == "vec":
            a = self.affine()
            return f"([0 <= {a} and {a} < {d[1]}] * {name}[{a}])"
        a, b = self.affine(), self.affine()
        return f"([0 <= {a} < {d[1]} and 0 <= {b} < {d[2]}] * {name}[{a}, {b}])"

    def scalar(self, depth: int) -> str:
        rng = self.rng
        if depth <= 0 or self.chance(0.2):
            r = rng.random()
            if r < 0.35:
                return self.access()
            if r < 0.55:
                return self.pick(CONSTANTS)
            if r < 0.7 and self.lets:
                return self.pick(self.lets)
            return next(n for n, d in self.decls.items() if d[0] == "R")
        r = rng.random()
        if r < 0.25:
            op = self.pick(("+", "-", "*", "*", "/"))
            return f"({self.scalar(depth - 1)} {op} {self.scalar(depth - 1)})"
        if r < 0.4:
            fn = self.pick(FUNCTIONS)
            args = [self.scalar(depth - 1) for _ in range(2 if fn in ("max", "min") else 1)]
            return f"{fn}({', '.join(args)})"
        if r < 0.65 and len(self.bound) < 4:
            v, ext = self.fresh_index(), self.extent()
            self.bound.append((v, ext))
            body = self.scalar(depth - 1)
            self.bound.pop()
            return f"(sum({v}:{ext}) {body})"
        if r < 0.8:
            return f"([{self.pred()}] * {self.scalar(depth - 1)})"
        if r < 0.9:
            name = f"t{len(self.lets)}"
            value = self.scalar(depth - 1)
            self.lets.append(name)
            body = self.scalar(depth - 1)
            self.lets.pop()
            return f"(let {name} = {value} in {body})"
        return f"(-{self.scalar(depth - 1)})"


def inputs_for(rng: random.Random, decls: dict, expr) -> list[dict]:
    """Inputs at several sizes: every size 0, 1, 2 and random; relations dense or CSR; values now and
    then NaN or infinite."""
    names = list(expr.sizes)
    out = []
    for choice in ([0] * len(names), [1] * len(names), [2] * len(names), None):
        sizes = {n: (rng.randrange(0, 6) if choice is None else choice[k]) for k, n in enumerate(names)}
        ins = dict(sizes)
        for name, d in decls.items():
            if name not in expr.free_vars:
                continue
            ins[name] = _value(rng, d, sizes)
        out.append(ins)
    return out


def _extent(text: str, sizes: dict) -> int:
    return max(0, int(eval(text, {}, dict(sizes))))  # noqa: S307 - our own affine text over sizes


def _value(rng: random.Random, d, sizes: dict):
    if d[0] == "R":
        return rng.choice((0.5, -1.25, 2.0, 0.0, float("nan"), float("inf"))) if rng.random() < 0.3 \
            else rng.uniform(-2, 2)
    if d[0] == "rel":
        shape = (_extent(d[1], sizes), _extent(d[2], sizes))
        dense = np.array([[rng.random() < 0.4 for _ in range(shape[1])] for _ in range(shape[0])],
                         dtype=bool).reshape(shape)
        return sp.csr_matrix(dense) if rng.random() < 0.5 else dense
    shape = tuple(_extent(s, sizes) for s in d[1:])
    arr = np.array([rng.uniform(-2, 2) for _ in range(int(np.prod(shape)))]).reshape(shape)
    if arr.size and rng.random() < 0.1:
        arr.flat[rng.randrange(arr.size)] = rng.choice((float("nan"), float("inf")))
    return arr


def outcome(f):
    """``("value", v)`` or ``("error", class name, message)``; anything else (a raw exception) propagates."""
    try:
        with np.errstate(all="ignore"):
            return ("value", f())
    except tl.TensorLangError as exc:
        return ("error", type(exc).__name__, str(exc))


def same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return a[1] == b[1]
    return close(a[1], b[1], tol=1e-9)


def same_shape(a, b) -> bool:
    """Both values, of the same structure and shapes (what a run with a non-finite value must keep)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(same_shape(p, q) for p, q in zip(a, b)))
    return np.shape(a) == np.shape(b)


def finite_throughout(expr, ins: dict) -> bool:
    """Whether every input of ``expr`` and every value it computes as written at ``ins`` is finite (sums,
    products, function values: ``tests/interpreter.py``, one element at a time)."""
    for v in ins.values():
        if not sp.issparse(v) and not np.isfinite(np.asarray(v, dtype=np.float64)).all():
            return False
    try:
        with np.errstate(all="ignore"):
            naive_evaluate(expr, ins)
    except Violation:
        return False
    return True


def too_deep(ref, got) -> bool:
    """The evaluator's documented limit: a program nested deeper than NumPy's axes, which a kernel computes."""
    return ref[0] == "error" and ref[1] == "UnsupportedError" and "nests its loops deeper" in ref[2] \
        and got[0] == "value"


def check(report: Report, expr, inputs: list[dict], src: str, what: str) -> None:
    """Evaluate and compile ``expr``, run both at every input set, record agreement."""
    kernel = outcome(lambda: tl.compile(expr))
    for ins in inputs:
        # the inputs this program has (a gradient of a linear program has lost its primal's: a kernel
        # refuses those, the evaluator ignores them)
        ins = {k: v for k, v in ins.items() if k in expr.free_vars or k in expr.sizes}
        ref = outcome(lambda: tl.evaluate(expr, **ins))
        got = kernel if kernel[0] == "error" else outcome(lambda: kernel[1](**ins))
        report.runs += 1
        finite = finite_throughout(expr, ins) if ref[0] == got[0] == "value" else True
        report.nonfinite_runs += not finite
        if same(got, ref):
            if ref[0] == "value":
                report.agreed_values += 1
            else:
                report.agreed_errors += 1
        elif too_deep(ref, got):
            report.unchecked += 1
        elif not finite and same_shape(got[1], ref[1]):
            report.nonfinite_differing += 1
        else:
            report.disagreed += 1
            if len(report.mismatches) < 20:
                report.mismatches.append((what, src, ins, ref, got))


class _OverTime(Exception):
    pass


def _over_time(signum, frame):
    raise _OverTime


def run(seed: int, count: int | None = None, seconds: float | None = None, limit: int = 60) -> Report:
    """Fuzz ``count`` programs (or until ``seconds`` have passed) from ``seed``; a program that takes
    more than ``limit`` seconds (in Python code: a hang in C is not interrupted) is recorded as slow."""
    rng = random.Random(seed)
    gen = Generator(rng)
    report = Report()
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _over_time)
    try:
        while ((count is None or report.programs < count)
               and (seconds is None or time.perf_counter() - start < seconds)):
            src, decls = gen.program()
            report.programs += 1
            try:
                expr = tl.parse(src)
            except tl.TensorLangError as exc:
                report.not_parsed.append((src, f"{type(exc).__name__}: {exc}"))
                continue
            report.parsed += 1
            inputs = inputs_for(rng, decls, expr)
            reals = [n for n, d in decls.items() if d[0] != "rel" and n in expr.free_vars]
            wrt = rng.choice(reals) if expr.type is R and reals else None
            stage = "primal"
            signal.alarm(limit)
            try:
                check(report, expr, inputs, src, stage)
                if wrt is not None:
                    stage = f"grad wrt {wrt}"
                    grad = outcome(lambda: tl.grad(expr, wrt))
                    if grad[0] == "value":
                        report.gradients += 1
                        check(report, grad[1], inputs, src, stage)
            except _OverTime:
                report.slow.append((src, stage))
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    report.seconds = time.perf_counter() - start
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=60, help="seconds one program may take (else: slow)")
    args = parser.parse_args(argv)
    report = run(args.seed, seconds=args.seconds, limit=args.limit)
    print(report)
    for what, src, ins, ref, got in report.mismatches:
        print(f"--- {what}\n{src}\ninputs {ins}\nevaluator {ref}\nkernel    {got}")
    for src, stage in report.slow:
        print(f"--- over the time limit ({stage})\n{src}")
    for src, msg in report.not_parsed[:10]:
        print(f"--- not parsed\n{src}\n{msg}")
    return 1 if report.mismatches or report.slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
