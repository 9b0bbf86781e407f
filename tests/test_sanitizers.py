"""Kernels and their gradients under AddressSanitizer and UndefinedBehaviorSanitizer (``tests/sanitized.py``),
in a subprocess that starts with the sanitizer runtime; and the option's refusal to load a sanitized
kernel into a process without that runtime (which ASan would end)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorlang as tl
from tensorlang.codegen.build import c_compiler

HERE = Path(__file__).resolve().parent


def _runtime(name: str) -> str | None:
    """The path of a runtime library of the C compiler, or None where it has none."""
    try:
        out = subprocess.run([c_compiler(), f"-print-file-name={name}"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if os.path.isabs(out) and os.path.exists(out) else None


ASAN, STDCXX = _runtime("libasan.so"), _runtime("libstdc++.so")
needs_asan = pytest.mark.skipif(not (ASAN and STDCXX), reason="the C compiler has no AddressSanitizer runtime")


@needs_asan
def test_kernels_and_gradients_under_sanitizers():
    env = {**os.environ, "TENSORLANG_SANITIZE": "1", "LD_PRELOAD": f"{ASAN} {STDCXX}",
           "ASAN_OPTIONS": "detect_leaks=0", "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([sys.executable, str(HERE / "sanitized.py")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    runs = int(r.stdout.split("sanitized runs: ")[1].split(",")[0])
    assert runs >= 300 and "differing: 0" in r.stdout


@needs_asan
def test_a_sanitized_kernel_needs_the_runtime(monkeypatch, tmp_path):
    if "libasan" in Path("/proc/self/maps").read_text():
        pytest.skip("this process has the sanitizer runtime")
    monkeypatch.setenv("TENSORLANG_SANITIZE", "1")
    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    with pytest.raises(tl.TensorLangError, match="AddressSanitizer runtime: start it with LD_PRELOAD"):
        tl.compile(tl.parse("x : [n]R; sum(i:n) x[i] * 1.75"))


SANITIZED_BY_KEYWORD = """
import numpy as np, tensorlang as tl
e = tl.parse("x : [n]R; sum(i:n - 1) (x[i + 1] - x[i]) * (x[i + 1] - x[i])")
x = np.array([1.0, 3.0, 2.5, -1.0])
k, plain = tl.compile(e, sanitize=True), tl.compile(e)
assert "-fsanitize=address,undefined" in k.flags and "-O3" not in k.flags, k.flags
assert not any(f.startswith("-fsanitize") for f in plain.flags) and k.library != plain.library
assert k(x=x) == tl.evaluate(e, x=x) == 4 + 0.25 + 12.25
g = tl.compile(tl.grad(e, "x"), sanitize=True)
assert np.allclose(g(x=x), tl.evaluate(tl.grad(e, "x"), x=x))
assert k.adjoint().flags == k.flags
print("sanitized by keyword: ok")
"""


@needs_asan
def test_sanitize_keyword_builds_a_sanitized_kernel_cached_apart(tmp_path):
    """``tl.compile(e, sanitize=True)`` without the environment variable: sanitizer flags (and a library of
    its own beside the optimised one), the right values, the adjoint sanitized too."""
    env = {k: v for k, v in os.environ.items() if k != "TENSORLANG_SANITIZE"}
    env.update({"LD_PRELOAD": f"{ASAN} {STDCXX}", "ASAN_OPTIONS": "detect_leaks=0",
                "PYTHONPATH": str(HERE.parent), "TENSORLANG_CACHE": str(tmp_path)})
    r = subprocess.run([sys.executable, "-c", SANITIZED_BY_KEYWORD], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "sanitized by keyword: ok" in r.stdout, r.stdout[-3000:] + r.stderr[-6000:]


def test_sanitize_keyword_needs_the_runtime_and_the_c_target(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORLANG_SANITIZE", raising=False)
    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    e = tl.parse("x : [n]R; sum(i:n) x[i] * 1.75")
    if ASAN and STDCXX and "libasan" not in Path("/proc/self/maps").read_text():
        with pytest.raises(tl.TensorLangError, match="built with the sanitizers .* AddressSanitizer runtime"):
            tl.compile(e, sanitize=True)
    with pytest.raises(tl.UnsupportedError, match="the CUDA target has no such build"):
        tl.compile(e, target="cuda", sanitize=True)
    assert "-O3" in tl.compile(e).flags  # unaffected: the optimised build
