"""Compilation is deterministic: the same program gives the same normal form, derivative and kernel text
in every process, whatever the hash seed or the objects' addresses.

Two fresh interpreters with different ``PYTHONHASHSEED`` (and, by address-space randomisation, different
object addresses) read the same programs (the examples and generated ones, as text) and print, for each,
its Tensor SSA form, its adjoint and gradient in every input, and the C and CUDA text of the program and
of its gradient; the two transcripts must be identical.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from strategies import collect, programs
except ImportError:  # tests/ as a package
    from tests.strategies import collect, programs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TRANSCRIPT = textwrap.dedent("""
    import sys
    import tensorlang as tl
    from tensorlang.codegen.kernel import generate
    from tensorlang.nodes import RelType, RealType

    for src in open(sys.argv[1]).read().split("\\n\\f\\n"):
        e = tl.parse(src)
        print("== program\\n" + str(e))
        print("-- to_ssa\\n" + str(tl.to_ssa(e)))
        print("-- c\\n" + generate(e, "c")[0])
        print("-- cuda\\n" + generate(e, "cuda")[0])
        for name, t in sorted(e.free_vars.items()):
            if isinstance(t, RelType):
                continue
            print(f"-- adjoint in {name}\\n" + str(tl.adjoint(e, wrt=name)))
            if isinstance(e.type, RealType):
                g = tl.grad(e, wrt=name)
                print(f"-- grad in {name}\\n" + str(g))
                print(f"-- grad in {name}, c\\n" + generate(g, "c")[0])
""")


def _generated(n: int) -> list[str]:
    return [str(e) for e in collect(programs(), n)]


def _transcript(path: Path, seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    r = subprocess.run([sys.executable, "-c", TRANSCRIPT, str(path)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_same_forms_derivatives_and_kernels_in_every_process(tmp_path):
    sources = [p.read_text() for p in sorted(EXAMPLES.glob("*.tl"))] + _generated(40)
    path = tmp_path / "programs.txt"
    path.write_text("\n\f\n".join(sources))
    first, second = _transcript(path, "1"), _transcript(path, "4242")
    assert first.count("== program") == len(sources)
    if first != second:
        a, b = first.splitlines(), second.splitlines()
        k = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y) if any(
            x != y for x, y in zip(a, b)) else min(len(a), len(b))
        start = max((j for j in range(k) if a[j] == "== program"), default=-1)
        program = a[start + 1] if start >= 0 else ""
        raise AssertionError(f"transcripts differ at line {k} (the program starting {program!r}):\n"
                             f"  hash seed 1:    {a[k] if k < len(a) else '<end>'}\n"
                             f"  hash seed 4242: {b[k] if k < len(b) else '<end>'}")
