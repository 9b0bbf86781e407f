"""Building generated C (and CUDA) into shared libraries: content-addressed and safe under concurrency.

The cache key is a hash of the source, the compiler's identity and the flags; the library lives at
``<cache>/<key>.so`` where ``<cache>`` is ``$TENSORLANG_CACHE`` or ``~/.cache/tensorlang``.  A build writes
the source and the library under temporary names unique to the process and renames them into place
(``os.replace`` is atomic on POSIX), so two processes building the same kernel at once both succeed
and the loser's rename just replaces an equivalent build (the seal beside it written again to match:
``install``); a reader never sees half a library.

The system C compiler (``$CC`` or ``cc``) runs at ``-O3`` with ``-march=native -fno-math-errno`` (so
loop-invariant calls of ``exp`` and friends can be hoisted and loops vectorised; no ``-ffast-math``,
which would reorder sums) and ``-ffp-contract=off`` (no fused multiply-adds: every product is rounded
as written, so a kernel's result does not depend on which of its loops the compiler vectorised, and a
lane-blocked loop gives the same bits as the plain one), ``--param=vect-max-version-for-alias-checks=64`` where
the compiler takes it (gcc: a loop that reads many arrays is vectorised behind run-time overlap checks instead of
staying scalar), with ``-fopenmp`` when the compiler accepts it,
and ``-DTL_VECTOR_MATH ... -lmvec`` where glibc's vector math library works (``vector_math_available``):
then ``exp``, ``log``, ``pow``, ``sin``, ``cos``, ``tan``, ``tanh`` in vectorised loops run 4 or 8 at a time
(the softmax's sum of ``exp`` 4x faster), each within 4 ulp instead of glibc's scalar 1 ulp.  A failure raises
``CompileError`` carrying the compiler's message and the numbered source.
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import warnings

from tensorlang.errors import CompileError, TensorLangError
from tensorlang.progress import stage

__all__ = ["cache_dir", "c_compiler", "compiler_id", "c_flags", "build_c", "load", "openmp_available", "vector_math_available",
           "VECTOR_MATH_FLAG", "VECTOR_MATH_DECLS", "nvcc_path",
           "build_cuda_object", "numbered"]

_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL] = {}
_PROBES: dict[str, object] = {}


def cache_dir() -> str:
    """The kernel cache: ``$TENSORLANG_CACHE`` or ``~/.cache/tensorlang``, made if missing; one that cannot
    be made (a file, no permission) is a ``TensorLangError`` naming it.  A read-only cache serves the
    kernels it holds; building one more into it is the error (``writable``)."""
    path = os.environ.get("TENSORLANG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tensorlang")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise TensorLangError(f"the kernel cache {path} (TENSORLANG_CACHE) is not a usable directory: "
                              f"{exc.strerror or exc}") from None
    return path


def writable(directory: str) -> str:
    """``directory``, where a build is about to write, or a ``TensorLangError`` saying it cannot be written."""
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TensorLangError(f"the kernel cache {directory} (TENSORLANG_CACHE) is not writable, and does not "
                              f"hold this kernel yet")
    return directory


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


def install(tmp: str, target: str, tries: int = 10) -> None:
    """Move the freshly built ``tmp`` to ``target`` (atomically), then write the seal of what is there beside
    it, until the entry is seen intact: another process installing the same kernel at once may rename its
    build (whose bytes differ in the temporary name they record) between this one's rename and seal, or
    write its seal after this one's, and the last to write makes the pair agree.  Where the seal cannot be
    written (a full disk), the entry is removed again: never a library without its seal."""
    _discard(target)
    _discard(target + ".sum")
    os.replace(tmp, target)
    seal_tmp = f"{target}.{os.getpid()}.{uuid.uuid4().hex[:8]}.sum.tmp"
    try:
        for _ in range(tries):
            seal = _seal_of(target)
            with open(seal_tmp, "w") as f:
                f.write(seal)
            os.replace(seal_tmp, target + ".sum")
            if intact(target):
                return
    except OSError:
        _remove(seal_tmp, target)
        raise


def _discard(path: str) -> None:
    """Remove what is not a regular file at an entry's name (a folder, a link, a pipe), which
    ``os.replace`` cannot replace or should not follow."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path) and not os.path.isdir(path)):
        _remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


# -- running the compilers: every command has a time limit, after which it and every process it started
# are stopped (a compiler that never returns, CC=a hung script, made tl.compile wait for ever)

BUILD_TIMEOUT_VARIABLE = "TENSORLANG_BUILD_TIMEOUT"
DEFAULT_BUILD_TIMEOUT = 600.0  # seconds: a 128-layer network's gradient builds in under 10
PROBE_TIMEOUT = 60.0  # a probe of the compiler (its version, OpenMP, libmvec), at most the build's limit


def build_timeout() -> float:
    """The time limit of one compiler run in seconds: ``$TENSORLANG_BUILD_TIMEOUT`` or 600."""
    text = os.environ.get(BUILD_TIMEOUT_VARIABLE, "")
    try:
        limit = float(text) if text else DEFAULT_BUILD_TIMEOUT
    except ValueError:
        limit = -1.0
    if not limit > 0:
        raise TensorLangError(f"{BUILD_TIMEOUT_VARIABLE}={text!r} is not a positive number of seconds")
    return limit


def run_limited(cmd: list[str], limit: float | None = None) -> subprocess.CompletedProcess:
    """``cmd``'s completed process (output captured as text), run for at most ``limit`` seconds (the
    build's limit, ``build_timeout``, by default; a probe's is the lesser of the two); past it the
    command and all it started are killed and a ``CompileError`` names the command, the limit and how to
    raise it."""
    limit = build_timeout() if limit is None else min(limit, build_timeout())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise CompileError(f"the command {' '.join(cmd)!r} did not finish within its time limit of {limit:g} s and "
                           f"was stopped; a slow compiler can be given longer with {BUILD_TIMEOUT_VARIABLE}=<seconds> "
                           f"(now {build_timeout():g})") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def c_compiler() -> str:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"


def compiler_id(cc: str) -> str:
    key = "id:" + cc
    if key not in _PROBES:
        try:
            out = run_limited([cc, "--version"], PROBE_TIMEOUT).stdout
        except (OSError, CompileError):
            out = ""
        _PROBES[key] = cc + "\n" + out.splitlines()[0] if out else cc
    return _PROBES[key]  # type: ignore[return-value]


def _builds(cc: str, source: str, flags: list, quietly: bool = False) -> bool:
    """Whether ``cc`` with ``flags`` builds ``source`` into a shared library (``quietly``: without a warning, as a
    compiler that ignores an option it does not know warns)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.c")
        with open(src, "w") as f:
            f.write(source)
        try:
            r = run_limited([cc, *flags, "-shared", "-fPIC", src, "-o", os.path.join(d, "p.so")], PROBE_TIMEOUT)
        except (OSError, CompileError):
            return False
    return r.returncode == 0 and not (quietly and "warning" in (r.stderr or ""))


def openmp_available(cc: str | None = None) -> bool:
    """Whether the C compiler builds and links a shared library with ``-fopenmp`` (probed once)."""
    cc = cc or c_compiler()
    key = "omp:" + cc
    if key not in _PROBES:
        _PROBES[key] = _builds(cc, "#include <omp.h>\nint tl_probe(void) { return omp_get_max_threads(); }\n",
                               ["-fopenmp"])
    return bool(_PROBES[key])


#: gcc vectorises a loop whose accesses may overlap behind run-time checks, at most 10 of them by default; a
#: kernel's loop that reads many arrays (a ten-step Runge-Kutta adjoint's reads some 40) needs more, or stays
#: scalar.  The values are the same either way (the checks choose between the vector and the scalar loop, and
#: neither reassociates a sum).
ALIAS_CHECKS_FLAG = "--param=vect-max-version-for-alias-checks=64"


def alias_checks_available(cc: str | None = None) -> bool:
    """Whether the C compiler takes ``ALIAS_CHECKS_FLAG`` (gcc does; clang refuses ``--param``), probed once."""
    cc = cc or c_compiler()
    key = "alias:" + cc
    if key not in _PROBES:
        _PROBES[key] = _builds(cc, "int tl_probe(int a) { return a + 1; }\n", ["-O3", ALIAS_CHECKS_FLAG], quietly=True)
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
                r = run_limited([cc, "-O3", "-march=native", "-fno-math-errno", VECTOR_MATH_FLAG, "-shared",
                                 "-fPIC", path, "-o", os.path.join(d, "p.so"), "-lmvec", "-lm"], PROBE_TIMEOUT)
                if r.returncode == 0:
                    fn = ctypes.CDLL(os.path.join(d, "p.so")).tl_probe
                    fn.restype = ctypes.c_double
                    want = sum(math.exp(0.01 * i) + math.log(1.0 + i) + 1.5 ** (0.1 * i) + math.sin(i) + math.cos(i)
                               + math.tan(0.01 * i) + math.tanh(0.1 * i) for i in range(64))
                    ok = abs(fn() - want) <= 1e-12 * abs(want)
            except (OSError, CompileError):
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
    if alias_checks_available():
        flags.append(ALIAS_CHECKS_FLAG)
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
    try:
        with open(src_tmp, "w") as f:
            f.write(source)
    except OSError:
        _remove(src_tmp)
        raise
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
    libs = ["-lmvec", "-lm"] if VECTOR_MATH_FLAG in flags else ["-lm"]
    return _built(source, _key(source, compiler_id(cc), " ".join(flags)), (".c", ".so"),
                  lambda src, out: [cc, *flags, src, "-o", out, *libs],
                  f"the C compiler ({cc} {' '.join(flags)})", directory, name)


# the errors of a write that found no room: a full disk, a file over the size limit, a full quota
_NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _no_room(text: str) -> str | None:
    """The line of a compiler's message that says it found no room to write its output (the linker may
    also be stopped by the signal of a file over the size limit), or None."""
    marks = [os.strerror(e) for e in _NO_ROOM] + [signal.strsignal(signal.SIGXFSZ)]
    return next((line.strip() for line in text.splitlines() if any(m in line for m in marks)), None)


def _built(source: str, key: str, exts: tuple[str, str], command, compiler: str, directory: str | None,
           name: str | None) -> str:
    """The path of ``source`` built by ``command(source path, output path)`` into ``directory`` (the cache
    by default) as ``<name or key><exts[1]>``, from the cache when it is there.  Where the cache has no
    room left (a full disk), nothing half-written stays in it: the kernel is built in a temporary folder
    of its own instead, with a warning, and only where that has no room either is it an error."""
    chosen = directory or cache_dir()
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
    target = os.path.join(chosen, (name or key) + exts[1])
    if name is None and intact(target):
        return target
    try:
        return _build_into(source, key, exts, command, compiler, writable(chosen) if directory is None
                           else chosen, name)
    except _NoRoom as exc:
        if directory is not None:
            raise CompileError(f"no room to write the kernel in {chosen}: {exc}") from None
        fallback = tempfile.mkdtemp(prefix="tensorlang-build-")
        warnings.warn(f"the kernel cache {chosen} has no room left ({exc}); this kernel is built in {fallback} "
                      f"for this process and rebuilt next time: free space or set TENSORLANG_CACHE", RuntimeWarning,
                      stacklevel=2)
        try:
            return _build_into(source, key, exts, command, compiler, fallback, name)
        except _NoRoom as again:
            shutil.rmtree(fallback, ignore_errors=True)
            raise CompileError(f"no room to build the kernel: not in the cache {chosen} ({exc}), nor in the "
                               f"temporary folder {fallback} ({again}); free space or set TENSORLANG_CACHE") from None


class _NoRoom(Exception):
    """A build that found no room to write (``_NO_ROOM``); its text is the system's reason."""


def _build_into(source: str, key: str, exts: tuple[str, str], command, compiler: str, directory: str,
                name: str | None) -> str:
    """One build into ``directory``: the source and output under temporary names, renamed into place when
    complete; on any failure both temporaries are removed."""
    target = os.path.join(directory, (name or key) + exts[1])
    src_tmp = out_tmp = ""
    try:
        src_tmp, out_tmp = _staged(source, directory, key, *exts)
        try:
            with stage(f"building kernel {name or key} with {compiler}"):
                r = run_limited(command(src_tmp, out_tmp))
        except OSError as exc:
            raise CompileError(f"cannot run {compiler}: {exc}\n--- generated source ---\n{numbered(source)}") from None
        if r.returncode != 0:
            reason = _no_room(r.stderr)
            if reason:
                raise _NoRoom(reason)
            raise _rejected(f"{compiler} rejected the generated kernel", source, r.stderr)
        os.replace(src_tmp, os.path.join(directory, (name or key) + exts[0]))
        install(out_tmp, target)
        return target
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            raise _NoRoom(exc.strerror or str(exc)) from None
        raise
    finally:
        _remove(*(p for p in (src_tmp, out_tmp) if p))


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
    return _built(source, _key(source, nvcc, " ".join(flags)), (".cu", ".cu.o"),
                  lambda src, out: [nvcc, *flags, src, "-o", out], "nvcc", None, None)
