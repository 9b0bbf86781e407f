"""NVRTC, the compiler CuPy runs CUDA kernels through, called with ctypes: no GPU needed.

nvcc compiles a translation unit with the C++ standard headers in reach; NVRTC has none (no ``math.h``:
no ``INFINITY``, no ``NAN``), so CUDA text that nvcc accepts can still fail where the kernel is run.
``compile_errors(source)`` is NVRTC's log for ``source`` (``""`` where it compiled), built for the
H100/H200 (``compute_90``) with the options ``CudaRunner`` gives CuPy.  ``available()`` says whether the
library is here (the ``nvidia-cuda-nvrtc`` wheel of the ``dev`` extra, or a CUDA toolkit's).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os

OPTIONS = (b"-std=c++17", b"--gpu-architecture=compute_90")


def _library():
    """The wheel's library (its builtins loaded first, as NVRTC looks them up by name), else the system's."""
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            builtins = sorted(glob.glob(os.path.join(lib, "libnvrtc-builtins.so.*")))
            main = sorted(glob.glob(os.path.join(lib, "libnvrtc.so.*")))
            if builtins and main:
                ctypes.CDLL(builtins[0], mode=ctypes.RTLD_GLOBAL)
                return ctypes.CDLL(main[0])
    found = ctypes.util.find_library("nvrtc")
    try:
        return ctypes.CDLL(found) if found else None
    except OSError:
        return None


_LIB = _library()


def available() -> bool:
    return _LIB is not None


def compile_errors(source: str) -> str:
    """NVRTC's log where ``source`` fails to compile, ``""`` where it compiles."""
    prog = ctypes.c_void_p()
    if _LIB.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"tl.cu", 0, None, None) != 0:
        raise RuntimeError("nvrtcCreateProgram failed")
    try:
        options = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
        status = _LIB.nvrtcCompileProgram(prog, len(OPTIONS), options)
        if status == 0:
            return ""
        size = ctypes.c_size_t()
        _LIB.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        _LIB.nvrtcGetProgramLog(prog, log)
        return log.value.decode(errors="replace") or f"NVRTC status {status}"
    finally:
        _LIB.nvrtcDestroyProgram(ctypes.byref(prog))
