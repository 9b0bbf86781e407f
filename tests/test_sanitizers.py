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
