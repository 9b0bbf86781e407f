"""Building generated C (and CUDA) into shared libraries: content-addressed and safe under concurrency.

The cache key is a hash of the source, the compiler's identity and the flags; the library lives at
``<cache>/<key>.so`` where ``<cache>`` is ``$TENSORLANG_CACHE`` or ``~/.cache/tensorlang``.  A build writes
the source and the library under temporary names unique to the process and renames them into place
(``os.replace`` is atomic on POSIX), so two processes building the same kernel at once both succeed
and the loser's rename just replaces an identical file; a reader never sees half a library.

The system C compiler (``$CC`` or ``cc``) runs at ``-O3`` with ``-march=native -fno-math-errno`` (so
loop-invariant calls of ``exp`` and friends can be hoisted and loops vectorised; no ``-ffast-math``,
which would reorder sums) and ``-ffp-contract=off`` (no fused multiply-adds: every product is rounded
as written, so a kernel's result does not depend on which of its loops the compiler vectorised, and a
lane-blocked loop gives the same bits as the plain one), with ``-fopenmp`` when the compiler accepts it,
and ``-DTL_VECTOR_MATH ... -lmvec`` where glibc's vector math library works (``vector_math_available``):
then ``exp``, ``log``, ``pow``, ``sin``, ``cos``, ``tan``, ``tanh`` in vectorised loops run 4 or 8 at a time
(the softmax's sum of ``exp`` 4x faster), each within 4 ulp instead of glibc's scalar 1 ulp.  A failure raises
``CompileError`` carrying the compiler's message and the numbered source.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

from tensorlang.errors import CompileError, TensorLangError

__all__ = ["cache_dir", "c_compiler", "compiler_id", "c_flags", "build_c", "load", "openmp_available", "vector_math_available",
           "VECTOR_MATH_FLAG", "VECTOR_MATH_DECLS", "nvcc_path",
           "build_cuda_object", "numbered"]

_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL] = {}
_PROBES: dict[str, object] = {}


def cache_dir() -> str:
    """The kernel cache: ``$TENSORLANG_CACHE`` or ``~/.cache/tensorlang``, made if missing; one that cannot
    be made or written (a file, no permission) is a ``TensorLangError`` naming it."""
    path = os.environ.get("TENSORLANG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tensorlang")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise TensorLangError(f"the kernel cache {path} (TENSORLANG_CACHE) is not a usable directory: "
                              f"{exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise TensorLangError(f"the kernel cache {path} (TENSORLANG_CACHE) is not writable")
    return path


# -- cache entries that heal: a library is used only when its seal (size and SHA-256, written beside it
# after it) matches its bytes; anything else at its name (a truncated or garbage file, a folder, a
# library without a seal) is removed and rebuilt.  Loading a truncated library would kill the process
# (SIGBUS when the loader touches a page past its end), so nothing unchecked is ever loaded.

def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _seal_of(path: str) -> str:
    return f"{os.path.getsize(path)} {_digest(path)}\n"


def intact(path: str) -> bool:
    """Whether the cache entry at ``path`` is a regular file whose seal matches it."""
    try:
        if not os.path.isfile(path) or os.path.islink(path):
            return False
        with open(path + ".sum") as f:
            return f.read() == _seal_of(path)
    except (OSError, UnicodeDecodeError):
        return False


def _asan_loaded() -> bool:
    """Whether the AddressSanitizer runtime is mapped into this process (it must come first)."""
    try:
        with open("/proc/self/maps") as f:
            return "libasan" in f.read()
    except OSError:
        return False


def _settled(path: str, tries: int = 20) -> bool:
    """``intact(path)``, allowing another process the moment between renaming its build into place and
    writing its seal (two builds of one source differ in the temporary file name they record)."""
    for k in range(tries):
        if intact(path):
            return True
        time.sleep(0.005 * (k + 1))
    return False


def install(tmp: str, target: str) -> None:
    """Move the freshly built ``tmp`` to ``target`` (atomically), then write its seal beside it."""
    _discard(target)
    seal = _seal_of(tmp)
    os.replace(tmp, target)
    seal_tmp = f"{target}.{os.getpid()}.{uuid.uuid4().hex[:8]}.sum.tmp"
    with open(seal_tmp, "w") as f:
        f.write(seal)
    os.replace(seal_tmp, target + ".sum")


def _discard(target: str) -> None:
    """Remove a damaged entry: a folder at its name (``os.replace`` cannot replace one)."""
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target, ignore_errors=True)


def c_compiler() -> str:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"


def compiler_id(cc: str) -> str:
    key = "id:" + cc
    if key not in _PROBES:
        try:
            out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        _PROBES[key] = cc + "\n" + out.splitlines()[0] if out else cc
    return _PROBES[key]  # type: ignore[return-value]


def openmp_available(cc: str | None = None) -> bool:
    """Whether the C compiler builds and links a shared library with ``-fopenmp`` (probed once)."""
    cc = cc or c_compiler()
    key = "omp:" + cc
    if key not in _PROBES:
        ok = False
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "p.c")
            with open(src, "w") as f:
                f.write("#include <omp.h>\nint tl_probe(void) { return omp_get_max_threads(); }\n")
            try:
                r = subprocess.run([cc, "-fopenmp", "-shared", "-fPIC", src, "-o", os.path.join(d, "p.so")],
                                   capture_output=True, timeout=60)
                ok = r.returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
        _PROBES[key] = ok
    return bool(_PROBES[key])


VECTOR_MATH_FLAG = "-DTL_VECTOR_MATH"
#: Declarations (in every kernel's prelude) that let gcc call glibc's vector math library, libmvec, from
#: the loops it vectorises: 4 (AVX2) or 8 (AVX-512) values per call, within 4 ulp of the scalar function.
VECTOR_MATH_DECLS = r"""
#ifdef TL_VECTOR_MATH
#define TL_SIMD __attribute__((__simd__("notinbranch")))
TL_SIMD double exp(double); TL_SIMD double log(double); TL_SIMD double pow(double, double);
TL_SIMD double sin(double); TL_SIMD double cos(double); TL_SIMD double tan(double); TL_SIMD double tanh(double);
#endif
"""


def vector_math_available(cc: str | None = None) -> bool:
    """Whether a library whose loops call libmvec's vector variants (``VECTOR_MATH_DECLS``) builds, loads
    and computes ``exp`` right (probed once): glibc on x86-64 with gcc; not elsewhere."""
    cc = cc or c_compiler()
    key = "mvec:" + cc
    if key not in _PROBES:
        src = ("#include <math.h>\n" + VECTOR_MATH_DECLS + "double tl_probe(void) { double v[64], s = 0;\n"
               "  for (int i = 0; i < 64; i++) v[i] = exp(0.01 * i) + log(1.0 + i) + pow(1.5, 0.1 * i) + sin(i) + cos(i)"
               " + tan(0.01 * i) + tanh(0.1 * i);\n  for (int i = 0; i < 64; i++) s += v[i];\n  return s; }\n")
        ok = False
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.c")
            with open(path, "w") as f:
                f.write(src)
            try:
                r = subprocess.run([cc, "-O3", "-march=native", "-fno-math-errno", VECTOR_MATH_FLAG, "-shared",
                                    "-fPIC", path, "-o", os.path.join(d, "p.so"), "-lmvec", "-lm"],
                                   capture_output=True, timeout=60)
                if r.returncode == 0:
                    fn = ctypes.CDLL(os.path.join(d, "p.so")).tl_probe
                    fn.restype = ctypes.c_double
                    want = sum(math.exp(0.01 * i) + math.log(1.0 + i) + 1.5 ** (0.1 * i) + math.sin(i) + math.cos(i)
                               + math.tan(0.01 * i) + math.tanh(0.1 * i) for i in range(64))
                    ok = abs(fn() - want) <= 1e-12 * abs(want)
            except (OSError, subprocess.SubprocessError):
                ok = False
        _PROBES[key] = ok
    return bool(_PROBES[key])


#: ``tl.compile(expr, sanitize=True)``, or ``TENSORLANG_SANITIZE=1`` for every kernel: built with AddressSanitizer
#: and UndefinedBehaviorSanitizer, any finding fatal (a report on stderr, then the process ends).  A process that loads such a kernel must
#: start with the ASan runtime, and the C++ runtime after it (islpy throws C++ exceptions, which ASan
#: intercepts): ``SANITIZE_PRELOAD``.
SANITIZE_PRELOAD = 'LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libstdc++.so)"'
SANITIZE_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                  "-fno-sanitize-recover=all"]


def sanitizing(requested: bool = False) -> bool:
    """Whether a kernel is built with the sanitizers: ``requested`` (``sanitize=True``) or
    ``TENSORLANG_SANITIZE`` set (to anything but ``0``)."""
    return bool(requested) or os.environ.get("TENSORLANG_SANITIZE", "") not in ("", "0")


def c_flags(openmp: bool | None = None, vector_math: bool | None = None, native: bool = True,
            sanitize: bool = False) -> list[str]:
    """The C compiler's flags for a kernel; OpenMP and libmvec where the machine has them (unless
    ``False`` is given).  ``native=False`` builds for the compiler's baseline CPU (every x86-64, for
    instance) instead of this machine's (``-march=native``): what ``tl.export`` does by default.  With
    ``sanitize`` (or under ``TENSORLANG_SANITIZE``), the sanitizers' flags instead of optimisation: the
    flags are part of the cache key, so sanitized libraries are cached apart."""
    if sanitizing(sanitize):
        return SANITIZE_FLAGS + ["-fno-math-errno", "-ffp-contract=off", "-fPIC", "-shared", "-std=gnu11"]
    target = "-march=native" if native else "-mtune=generic"
    flags = ["-O3", target, "-fno-math-errno", "-ffp-contract=off", "-fPIC", "-shared", "-std=gnu11"]
    if openmp is None:
        openmp = openmp_available()
    if openmp:
        flags.append("-fopenmp")
    if vector_math is None:
        vector_math = vector_math_available()
    if vector_math:
        flags.append(VECTOR_MATH_FLAG)
    return flags


def numbered(source: str) -> str:
    return "\n".join(f"{k + 1:5d}  {line}" for k, line in enumerate(source.splitlines()))


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _staged(source: str, directory: str, key: str, src_ext: str, out_ext: str) -> tuple[str, str]:
    """Temporary paths, unique to this process and call, for a build of ``source`` (written to the first)
    and its output: a build writes there and renames, so two processes can build at once."""
    tag = f".{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    src_tmp = os.path.join(directory, key + tag + src_ext)
    with open(src_tmp, "w") as f:
        f.write(source)
    return src_tmp, os.path.join(directory, key + tag + out_ext)


def _rejected(what: str, source: str, stderr: str) -> CompileError:
    """The error for a compiler that rejected ``source``: its message and the numbered source."""
    err = CompileError(f"{what}:\n{stderr.strip()}\n--- generated source ---\n{numbered(source)}")
    err.source = source  # type: ignore[attr-defined]
    err.compiler_message = stderr  # type: ignore[attr-defined]
    return err


def build_c(source: str, flags: list[str] | None = None, directory: str | None = None,
            name: str | None = None) -> str:
    """The path of the shared library built from ``source`` (from the cache when it is there)."""
    cc = c_compiler()
    flags = c_flags() if flags is None else flags
    key = _key(source, compiler_id(cc), " ".join(flags))
    directory = directory or cache_dir()
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, (name or key) + ".so")
    if name is None and intact(target):
        return target
    src_tmp, so_tmp = _staged(source, directory, key, ".c", ".so")
    try:
        libs = ["-lmvec", "-lm"] if VECTOR_MATH_FLAG in flags else ["-lm"]
        r = subprocess.run([cc, *flags, src_tmp, "-o", so_tmp, *libs], capture_output=True, text=True)
    except OSError as exc:
        os.unlink(src_tmp)
        raise CompileError(f"cannot run the C compiler {cc!r}: {exc}\n--- generated source ---\n"
                           f"{numbered(source)}") from None
    if r.returncode != 0:
        os.unlink(src_tmp)
        if os.path.exists(so_tmp):
            os.unlink(so_tmp)
        raise _rejected(f"the C compiler ({cc} {' '.join(flags)}) rejected the generated kernel", source, r.stderr)
    os.replace(src_tmp, os.path.join(directory, (name or key) + ".c"))
    install(so_tmp, target)
    return target


def load(path: str, sanitize: bool = False) -> ctypes.CDLL:
    """The library at ``path``, loaded once per process, after checking it against its seal; a library
    built with the sanitizers (``sanitize``, or under ``TENSORLANG_SANITIZE``) only into a process that has
    their runtime."""
    with _LOCK:
        lib = _LOADED.get(path)
        if lib is None:
            if sanitizing(sanitize) and not _asan_loaded():
                raise TensorLangError(
                    "this kernel is built with the sanitizers (sanitize=True or TENSORLANG_SANITIZE), but this "
                    f"process does not have the AddressSanitizer runtime: start it with {SANITIZE_PRELOAD} "
                    "(and ASAN_OPTIONS=detect_leaks=0 for Python)")
            if not _settled(path):
                raise TensorLangError(f"the kernel library {path} is damaged (its size or checksum does not "
                                      f"match {path}.sum); remove it to rebuild")
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                raise TensorLangError(f"the kernel library {path} cannot be loaded: {exc}") from None
            _LOADED[path] = lib
        return lib


# --------------------------------------------------------------------------------------------------
# CUDA


def nvcc_path() -> str | None:
    return os.environ.get("NVCC") or shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def build_cuda_object(source: str, arch: str | None = None) -> str:
    """Compile CUDA source with nvcc to an object file (cached like C); raises ``CompileError``."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise CompileError("nvcc is not available")
    flags = ["-O3", "-c", "-std=c++17", "-w", "-Xcompiler", "-fPIC"]
    if arch:
        flags += [f"-arch={arch}"]
    key = _key(source, nvcc, " ".join(flags))
    directory = cache_dir()
    target = os.path.join(directory, key + ".cu.o")
    if intact(target):
        return target
    src_tmp, obj_tmp = _staged(source, directory, key, ".cu", ".o")
    r = subprocess.run([nvcc, *flags, src_tmp, "-o", obj_tmp], capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(src_tmp)
        raise _rejected("nvcc rejected the generated CUDA kernel", source, r.stderr)
    os.replace(src_tmp, os.path.join(directory, key + ".cu"))
    install(obj_tmp, target)
    return target
