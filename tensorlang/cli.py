"""``tl-cost``: the costs of a program, its forward derivative and its adjoint, and the bounds of
Theorems 6.1 and 6.35 (docs/derive.md, section ``tl-cost``).

    tl-cost FILE --wrt x[,y...] [--size n=1000 --size m=16] [--json]
    tl-cost --example conv --wrt x ...      (a program shipped with the package)
    tl-cost --list-examples

With every size given, it prints ``tl.certify``'s table (or JSON).  With no size given, it prints the
costs as polynomials in the sizes (``tl.cost`` of the program, of ``tl.derivative`` and of
``tl.adjoint``) and decides the bounds at a fixed set of sample sizes, ``SAMPLE_SIZES`` for every size
variable (all combinations for up to two size variables; otherwise every variable at each sample value
in turn, the others at each sample value too, diagonally); the output says so.  A program over data
relations has costs that depend on the relations' data, which the command line cannot take: exit 2.

Exit status: 0 when both bounds hold, 1 when one does not, 2 on bad input (a missing file, a parse,
type or bounds error, printed as ``FILE:line:col: message`` with the source line and a caret; a bad
``--size``; a ``--wrt`` that names no input).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import textwrap

SAMPLE_SIZES = (1, 2, 5, 16, 100, 1000)
BOUND = 4


class _Usage(Exception):
    """Bad input: the message is printed as is and the exit status is 2."""


def _size_arg(text: str) -> tuple[str, int]:
    name, eq, value = text.partition("=")
    name = name.strip()
    if not eq or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=INT, not {text!r}")
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the size {name} must be an integer, not {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"the size {name} must not be negative, got {number}")
    return name, number


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tl-cost",
        description="Costs of a tensorlang program, its forward derivative and its adjoint, and the bounds "
                    "of Theorems 6.1 and 6.35 (forward <= 4 x primal, $_IO(adjoint) <= 4 x $_IO(primal)).",
        epilog="exit status: 0 every bound holds, 1 a bound does not hold, 2 bad input",
    )
    ap.add_argument("file", metavar="FILE", nargs="?", help="the program (.tl)")
    ap.add_argument("--example", metavar="NAME",
                    help="instead of FILE, an example program shipped with tensorlang (see --list-examples)")
    ap.add_argument("--list-examples", action="store_true", help="list the example programs and exit")
    ap.add_argument("--wrt", help="the inputs to differentiate, comma separated: x or x,y (required)")
    ap.add_argument("--size", action="append", default=[], type=_size_arg, metavar="NAME=INT",
                    help="a size variable's value (repeatable); without any, costs are printed symbolically")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return ap


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse reports bad arguments with status 2 (and --help with 0)
        return int(exc.code or 0)
    if args.list_examples:
        print(_example_list())
        return 0
    try:
        _check_usage(args)
        report = _report(args)
    except _Usage as exc:
        text = str(exc)
        located = text.split(":", 1)[0] == args.file and "\n" in text  # FILE:line:col: message + caret
        print(text if located else f"tl-cost: {text}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else report["text"])
    return 0 if report["ok"] else 1


# ------------------------------------------------------------------------------------------------


def _example_list() -> str:
    from tensorlang.examples import describe, names

    width = max(map(len, names()))
    return "\n".join(textwrap.fill(describe(name), 100, initial_indent=f"{name:<{width}}  ",
                                   subsequent_indent=" " * (width + 2)) for name in names())


def _example_hint(path: str) -> str:
    """Where a missing FILE names an example shipped with the package (``examples/conv.tl`` outside a
    clone), how to run that example."""
    import os

    from tensorlang.examples import names

    stem = os.path.basename(path).removesuffix(".tl")
    return f" (the example shipped with tensorlang is: tl-cost --example {stem} ...)" if stem in names() else ""


def _check_usage(args) -> None:
    """Exactly one of FILE and --example, and --wrt; ``args.file`` becomes the example's path."""
    from tensorlang.errors import TensorLangError

    if (args.file is None) == (args.example is None):
        raise _Usage("give a program: FILE or --example NAME (one of them; --list-examples lists the names)")
    if args.example is not None:
        from tensorlang.examples import path

        try:
            args.file = str(path(args.example))
        except TensorLangError as exc:
            raise _Usage(f"--example: {exc}") from None
    if not args.wrt:
        raise _Usage("--wrt is required: the inputs to differentiate, e.g. --wrt x")


def _load(path: str):
    import tensorlang as tl
    from tensorlang.errors import TensorLangError

    try:
        with open(path, encoding="utf-8") as f:
            src = f.read()
    except OSError as exc:
        raise _Usage(f"{path}: {exc.strerror or exc}{_example_hint(path)}") from None
    except UnicodeDecodeError as exc:
        raise _Usage(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    try:
        return tl.parse(src, filename=path)
    except TensorLangError as exc:
        raise _Usage(str(exc) if exc.location is not None else f"{path}: {exc}") from None


def _report(args) -> dict:
    from tensorlang.derive.api import wrt_vars
    from tensorlang.errors import TensorLangError
    from tensorlang.nodes import RelType

    expr = _load(args.file)
    names = [w.strip() for w in args.wrt.split(",") if w.strip()]
    try:
        variables = wrt_vars(expr, names)
    except TensorLangError as exc:
        raise _Usage(f"{args.file}: --wrt: {exc.message}") from None
    relations = [name for name, t in expr.free_vars.items() if isinstance(t, RelType)]
    if relations:
        raise _Usage(f"{args.file}: the program reads the data relation(s) or index array(s) {', '.join(relations)}: "
                     "its costs depend on their data, which tl-cost cannot take (use tl.certify with them)")
    sizes: dict = {}
    for name, value in args.size:
        if name in sizes and sizes[name] != value:
            raise _Usage(f"--size {name} given twice ({sizes[name]} and {value})")
        sizes[name] = value
    unknown = [n for n in sizes if n not in expr.sizes]
    if unknown:
        raise _Usage(f"--size {unknown[0]}: the program has no size {unknown[0]} "
                     f"(its sizes: {', '.join(expr.sizes) or 'none'})")
    missing = [n for n in expr.sizes if n not in sizes]
    if sizes and missing:
        raise _Usage(f"--size: give every size or none (missing: {', '.join(missing)}); "
                     "with none, the costs are printed symbolically")
    try:
        if sizes or not expr.sizes:
            return _concrete(args.file, expr, variables, sizes)
        return _symbolic(args.file, expr, variables)
    except TensorLangError as exc:
        raise _Usage(str(exc) if exc.location is not None else f"{args.file}: {exc}") from None


def _concrete(path, expr, variables, sizes) -> dict:
    import tensorlang as tl

    cert = tl.certify(expr, variables, **sizes)
    numbers = _numbers(cert)
    text = f"{path}\n{cert}"
    return {"file": path, "wrt": list(cert.wrt), "sizes": dict(sizes), "symbolic": False, **numbers,
            "bound": cert.BOUND, "ok": cert.ok, "text": text}


def _numbers(cert) -> dict:
    return {
        "primal": cert.primal, "forward": cert.forward, "adjoint": cert.adjoint,
        "io_primal": cert.io_primal, "io_adjoint": cert.io_adjoint,
        "forward_ratio": _finite(cert.forward_ratio), "adjoint_ratio": _finite(cert.adjoint_ratio),
        "forward_ok": cert.forward_ratio <= cert.BOUND, "adjoint_ok": cert.adjoint_ratio <= cert.BOUND,
    }


def _finite(x: float):
    return x if math.isfinite(x) else str(x)


def _samples(names) -> list[dict]:
    if len(names) <= 2:
        return [dict(zip(names, values)) for values in itertools.product(SAMPLE_SIZES, repeat=len(names))]
    out = []
    for big in SAMPLE_SIZES:
        for small in SAMPLE_SIZES:
            for k in range(len(names)):
                out.append({n: (big if j == k else small) for j, n in enumerate(names)})
    unique = []
    for s in out:
        if s not in unique:
            unique.append(s)
    return unique


def _symbolic(path, expr, variables) -> dict:
    import sympy

    import tensorlang as tl
    from tensorlang.cost import ratio, type_size
    from tensorlang.derive.api import Certificate
    from tensorlang.traversal import free_vars

    d = tl.derivative(expr, variables)
    a = tl.adjoint(expr, variables)
    symbols = {n: sympy.Symbol(n, integer=True, nonnegative=True) for n in expr.sizes}
    polys = {
        "primal": tl.cost(expr), "forward": tl.cost(d), "adjoint": tl.cost(a),
    }
    polys = {k: _with_symbols(v, symbols) for k, v in polys.items()}
    io = sympy.Integer(0)
    for t in [v.type for v in free_vars(expr)] + [expr.type]:
        io += _type_size_symbolic(t, symbols)
    polys["io_primal"] = sympy.simplify(polys["primal"] + io)
    polys["io_adjoint"] = sympy.simplify(polys["adjoint"] + io)
    samples = []
    worst_f = worst_a = None
    for point in _samples(list(expr.sizes)):
        subs = {symbols[n]: v for n, v in point.items()}
        values = {k: int(sympy.sympify(p).subs(subs)) for k, p in polys.items()}
        io_here = sum(type_size(v.type, point) for v in free_vars(expr)) + type_size(expr.type, point)
        assert values["io_primal"] == values["primal"] + io_here
        fr = ratio(values["forward"], values["primal"])
        ar = ratio(values["io_adjoint"], values["io_primal"])
        samples.append({"sizes": point, **values, "forward_ratio": _finite(fr), "adjoint_ratio": _finite(ar)})
        if worst_f is None or fr > worst_f[0]:
            worst_f = (fr, point)
        if worst_a is None or ar > worst_a[0]:
            worst_a = (ar, point)
    forward_ok, adjoint_ok = worst_f[0] <= Certificate.BOUND, worst_a[0] <= Certificate.BOUND
    ok = forward_ok and adjoint_ok
    wrt = [v.name for v in variables]

    def at(point):
        return ", ".join(f"{k} = {v}" for k, v in point.items())

    rows = [
        ("primal cost", polys["primal"], ""),
        ("forward cost", polys["forward"], ""),
        ("adjoint cost", polys["adjoint"], ""),
        ("$_IO(primal)", polys["io_primal"], "cost + $(inputs) + $(output)"),
        ("$_IO(adjoint)", polys["io_adjoint"], ""),
    ]
    width = max(len(r[0]) for r in rows)
    grid = " x ".join(expr.sizes) if len(expr.sizes) <= 2 else "one size at a time against the others"
    lines = [
        f"{path}",
        f"symbolic costs for wrt {', '.join(wrt)} (in {', '.join(expr.sizes)}): {'ok' if ok else 'BOUND VIOLATED'}",
    ]
    lines += [f"  {name:<{width}}  {_pretty(p)}" + (f"    ({note})" if note else "") for name, p, note in rows]
    lines.append(f"bounds decided at sample sizes {', '.join(expr.sizes)} in {{{', '.join(map(str, SAMPLE_SIZES))}}} "
                 f"({grid}, {len(samples)} points):")
    lines.append(f"  {'forward / primal':<30} max {worst_f[0]:.3f} at {at(worst_f[1])}  <= {Certificate.BOUND} "
                 f"(Theorem 6.1) {'ok' if forward_ok else 'VIOLATED'}")
    lines.append(f"  {'$_IO(adjoint) / $_IO(primal)':<30} max {worst_a[0]:.3f} at {at(worst_a[1])}  <= "
                 f"{Certificate.BOUND} (Theorem 6.35) {'ok' if adjoint_ok else 'VIOLATED'}")
    return {
        "file": path, "wrt": wrt, "sizes": None, "symbolic": True,
        **{k: str(v) for k, v in polys.items()},
        "sample_sizes": list(SAMPLE_SIZES), "samples": samples,
        "forward_ratio": _finite(worst_f[0]), "forward_ratio_at": worst_f[1],
        "adjoint_ratio": _finite(worst_a[0]), "adjoint_ratio_at": worst_a[1],
        "forward_ok": forward_ok, "adjoint_ok": adjoint_ok, "bound": Certificate.BOUND, "ok": ok,
        "text": "\n".join(lines),
    }


def _with_symbols(expr, symbols):
    import sympy

    expr = sympy.sympify(expr)
    return expr.xreplace({s: symbols[s.name] for s in expr.free_symbols if s.name in symbols})


def _type_size_symbolic(t, symbols):
    import sympy

    from tensorlang.nodes import PairType, RelType, TensorType

    if isinstance(t, PairType):
        return _type_size_symbolic(t.first, symbols) + _type_size_symbolic(t.second, symbols)
    if isinstance(t, RelType):
        return sympy.Integer(0)
    if isinstance(t, TensorType):
        size = sympy.Integer(t.size.const)
        for v, c in t.size.terms:
            size += c * symbols[v.name]
        return size * _type_size_symbolic(t.elem, symbols)
    return sympy.Integer(1)


def _pretty(p) -> str:
    import sympy

    p = sympy.piecewise_fold(sympy.sympify(p))
    if isinstance(p, sympy.Piecewise):
        parts = []
        for value, cond in p.args:
            value = sympy.expand(value)
            parts.append(f"{value} otherwise" if cond is sympy.true else f"{value} if {cond}")
        return "; ".join(parts) if len(parts) > 1 else parts[0]
    return str(sympy.expand(p))


if __name__ == "__main__":
    sys.exit(main())
