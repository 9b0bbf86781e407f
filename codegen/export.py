"""``tl.export(kernels, name, directory)``: a Python module plus its compiled library, for NumPy alone.

Writes ``<directory>/<name>.py`` and ``<directory>/<name>_lib.so`` (with its C source beside it,
``<name>_lib.c``).  The module embeds ``tensorlang/spelling.py``, ``tensorlang/index_arrays.py`` and
``codegen/runtime.py`` verbatim
(NumPy and ctypes only: the same input checks, size inference, messages and argument layout as the
in-process ``Kernel``) and the kernels' argument descriptions as JSON; it imports nothing from
tensorlang, so it runs where only NumPy is installed.  ``kernels`` is a ``Kernel`` or ``Expr`` (the module's function is ``kernel``), a list of them
(``kernel0``, ``kernel1``, ...) or a dict from function names to them.  Bad inputs raise the module's
``ShapeError`` (a ``ValueError``).

The library is portable by default: built for the compiler's baseline CPU (``-mtune=generic``, no
``-march``), so that it runs on any machine of the same architecture; ``native=True`` builds it for this
machine's CPU (``-march=native``: AVX2 or AVX-512 where this machine has them, and an illegal
instruction on a machine without).  The module records how it was built in ``BUILD``: the compiler,
its flags and whether they are native.
"""
from __future__ import annotations

import json
import os
import re

from tensorlang import index_arrays, spelling
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import Expr

from . import runtime
from .build import compiler_id, build_c, c_compiler, c_flags
from .c import CEmitter
from .generate import emitter_for
from .kernel import Kernel

__all__ = ["export"]

_TEMPLATE = '''"""{name}: tensorlang kernels exported by tl.export; needs only NumPy.

Functions: {functions}.  Each is called like ``tl.evaluate`` on its program: inputs by name (arrays,
floats, tuples for pairs; relations as boolean arrays, scipy.sparse matrices or lists of index tuples),
sizes inferred from shapes or passed by name; returns floats, NumPy arrays or tuples.

Built {built}; ``BUILD`` holds the compiler and its flags.
"""
from __future__ import annotations

# ---- runtime (tensorlang/spelling.py and codegen/runtime.py, verbatim) ---------------------------
{runtime}
# ---- this module's kernels -----------------------------------------------------------------------
import json as _json
import os as _os


class ShapeError(ValueError):
    """An input whose type, shape or dtype does not match the program's declarations."""


_META = _json.loads({meta!r})
_LIB = ctypes.CDLL(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), {lib!r}))
_RUNNERS = {{fname: Runner(m, _LIB, error=ShapeError) for fname, m in _META.items()}}
PROGRAMS = {programs!r}
BUILD = {build!r}

{defs}
__all__ = ["ShapeError", "PROGRAMS", "BUILD", {names}]
'''

_DEF = '''
def {fname}(**inputs):
    """The compiled program:

{doc}
    """
    return _RUNNERS[{fname!r}](**inputs)
'''


def _normalise(kernels) -> dict:
    if isinstance(kernels, (Kernel, Expr)):
        return {"kernel": kernels}
    if isinstance(kernels, dict):
        return dict(kernels)
    return {f"kernel{k}": v for k, v in enumerate(kernels)}


def _runtime_source() -> str:
    """``spelling``, ``index_arrays`` and ``runtime`` as one text, verbatim but for their ``from __future__``
    lines and the runtime's imports of the other two (whose texts come first)."""
    text = ""
    for module in (spelling, index_arrays, runtime):
        with open(module.__file__) as f:
            text += f.read().replace("from __future__ import annotations\n", "")
    return re.sub(r"^from tensorlang\.(spelling|index_arrays) import .*\n", "", text, flags=re.M)


def export(kernels, name: str, directory: str, native: bool = False) -> str:
    """Write the module and its library; returns the module's path.  ``native=True`` builds the library
    for this machine's CPU only (``-march=native``); by default it runs on any CPU of its architecture."""
    if not name.isidentifier():
        raise UnsupportedError(f"the module name {name!r} must be a Python identifier")
    items = _normalise(kernels)
    for fname in items:
        if not fname.isidentifier() or fname.startswith("_") or fname in ("ShapeError", "Runner", "PROGRAMS", "BUILD"):
            raise UnsupportedError(f"{fname!r} cannot be the name of an exported function")
    os.makedirs(directory, exist_ok=True)
    by_dtype: dict[str, list] = {}
    metas: dict[str, dict] = {}
    programs: dict[str, str] = {}
    for fname, k in items.items():
        expr, dtype = (k.expr, k.dtype) if isinstance(k, Kernel) else (k, "float64")
        emitter, meta = emitter_for(expr, "c", dtype, f"tl_{name}_{fname}")
        by_dtype.setdefault(dtype, []).append(emitter)
        metas[fname] = meta
        programs[fname] = str(expr)
    if len(by_dtype) > 1:
        raise UnsupportedError("tl.export puts kernels of one dtype in one library; export float32 and "
                               "float64 kernels as two modules")
    (emitters,) = by_dtype.values()
    source = CEmitter.translation_unit(emitters)
    lib_name = f"{name}_lib"
    flags = c_flags(native=native)
    build_c(source, flags=flags, directory=directory, name=lib_name)
    build = {"compiler": compiler_id(c_compiler()).replace("\n", ": "), "flags": flags, "native": native}
    built = "for this machine's CPU (-march=native)" if native else "for any CPU of its architecture (no -march)"
    defs = "".join(
        _DEF.format(fname=fname, doc="\n".join("        " + line for line in programs[fname].splitlines()))
        for fname in items)
    text = _TEMPLATE.format(name=name, functions=", ".join(items), runtime=_runtime_source(),
                            meta=json.dumps(metas), lib=lib_name + ".so", programs=programs, defs=defs,
                            build=build, built=built,
                            names=", ".join(repr(f) for f in items))
    path = os.path.join(directory, name + ".py")
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path
