"""The call of a compiled entry point from C: a CPython extension module of one function, built once per
interpreter into the kernel cache.

``call(entry, sizes, arrays, extra)`` reads the address of each array of the list ``arrays`` through the
buffer protocol, appends the integers of the tuple ``extra`` (the BLAS table's and the workspace's
addresses), and calls ``void entry(const int64_t *sizes, void **args)`` with the GIL released, as ctypes
does, holding the buffers until it returns.  It does in C what ``runtime.Runner`` does otherwise with
ctypes (one ctypes object per array, a ctypes array of pointers, the foreign call): for a kernel with a dozen
arrays that is about 10 us of a call's own cost.  Where the module cannot be built (no C compiler, no
``Python.h``) or under ``TENSORLANG_ENTRY_CALLER=0``, ``caller()`` is None and the runner uses ctypes.
``runtime`` itself does not import this module: an exported kernel runs where only NumPy is installed.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import threading

from .build import build_c, sanitizing

__all__ = ["caller"]

MODULE = "tl_entry_caller"

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* built for Python %(version)s */

typedef void (*tl_entry)(const void *sizes, void **args);

#define TL_ON_STACK 64

static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_CheckExact(args[2]) || !PyTuple_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "call(entry address, sizes array, list of arrays, tuple of addresses)");
        return NULL;
    }
    tl_entry entry = (tl_entry)PyLong_AsVoidPtr(args[0]);
    if (entry == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "the entry point's address is NULL");
        return NULL;
    }
    PyObject *arrays = args[2], *extra = args[3];
    Py_ssize_t n = PyList_GET_SIZE(arrays), m = PyTuple_GET_SIZE(extra);
    Py_buffer stack_views[TL_ON_STACK];
    void *stack_ptrs[TL_ON_STACK + 8];
    Py_buffer *views = stack_views;
    void **ptrs = stack_ptrs;
    if (n > TL_ON_STACK || m > 8) {
        views = PyMem_Malloc(sizeof(Py_buffer) * (n ? n : 1));
        ptrs = PyMem_Malloc(sizeof(void *) * (n + m ? n + m : 1));
        if (views == NULL || ptrs == NULL) {
            PyMem_Free(views);
            PyMem_Free(ptrs);
            return PyErr_NoMemory();
        }
    }
    Py_buffer sizes;
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(args[1], &sizes, PyBUF_SIMPLE) < 0) goto done;
    for (; held < n; held++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(arrays, held), &views[held], PyBUF_SIMPLE) < 0) goto release;
        ptrs[held] = views[held].buf;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        ptrs[n + j] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(extra, j));
        if (ptrs[n + j] == NULL && PyErr_Occurred()) goto release;
    }
    Py_BEGIN_ALLOW_THREADS
    entry(sizes.buf, ptrs);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    PyBuffer_Release(&sizes);
done:
    if (views != stack_views) {
        PyMem_Free(views);
        PyMem_Free(ptrs);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(entry, sizes, arrays, extra): the entry point called on the arrays' addresses and extra's"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(module)s", NULL, -1, methods};

PyMODINIT_FUNC PyInit_%(module)s(void) { return PyModule_Create(&module); }
"""

_LOCK = threading.Lock()
_FOUND: list = []   # [the call function or None], once looked for


def caller():
    """The extension's ``call``, built and imported on first use (None where it cannot be, under
    ``TENSORLANG_ENTRY_CALLER=0``, or in a process that builds kernels with the sanitizers, whose calls
    stay ctypes' for the sanitizers' reports)."""
    if os.environ.get("TENSORLANG_ENTRY_CALLER", "") == "0" or sanitizing():
        return None
    with _LOCK:
        if not _FOUND:
            _FOUND.append(_built())
        return _FOUND[0]


def _built():
    include = sysconfig.get_paths().get("include")
    if not include or not os.path.exists(os.path.join(include, "Python.h")):
        return None
    source = SOURCE % {"version": sys.version.split()[0] + " " + sys.implementation.cache_tag, "module": MODULE}
    try:
        path = build_c(source, ["-O2", "-fPIC", "-shared", "-std=gnu11", f"-I{include}"])
        loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
        spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception:  # noqa: BLE001 - any trouble building or loading it: ctypes calls the kernels
        return None
    return module.call
