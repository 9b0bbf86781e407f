"""``tensorlang.ad`` differentiates functions wherever Python runs them: ``python -c``, the interactive prompt
(through a pseudo-terminal), notebook cells (IPython), text registered with ``ad.define``; ``exec``'d text
whose source Python did not keep by its recording (``tests/ad/test_ad_recorded.py`` tests that path).  Each gradient is checked against its closed form, and
``ad.code_source(f).origin`` says where the source came from."""
import os
import select
import subprocess
import sys
import time

import pytest

from tensorlang import ad

TIMEOUT = 120   # seconds: tensorlang's import and the first transforms, on a loaded machine


def _run(code: str, *options: str) -> str:
    done = subprocess.run([sys.executable, *options, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stdout


# python -c ----------------------------------------------------------------------------------------------------

def test_a_lambda_in_python_c():
    assert _run("from tensorlang import ad; print(ad.grad(lambda x: x * x)(3.0))") == "6.0\n"


def test_several_functions_on_one_line_of_python_c():
    out = _run("from tensorlang import ad; f = lambda x: x * x; g = lambda x: x * x * x; "
               "print(ad.grad(f)(3.0), ad.grad(g)(2.0), ad.grad(lambda x: 5.0 * x)(1.0), "
               "ad.grad(lambda x: x * x * x * x)(1.0), ad.code_source(g).origin)")
    assert out == "6.0 12.0 5.0 4.0 python -c\n"   # 2x, 3x^2, 5, 4x^3


def test_defs_with_loops_and_branches_in_python_c():
    code = ("from tensorlang import ad\n"
            "def f(x):\n"
            "    s = 0.0\n"
            "    for i in range(3):\n"
            "        s = s + x * i\n"
            "    return s\n"
            "def g(x):\n"
            "    if x > 0:\n"
            "        return x * x\n"
            "    return -x\n"
            "print(ad.grad(f)(2.0), ad.grad(g)(3.0), ad.grad(g)(-3.0), ad.grad(ad.grad(g))(3.0))")
    assert _run(code) == "3.0 6.0 -1.0 2.0\n"      # f = 3x; g = x^2 for x > 0, -x otherwise


def test_python_c_after_other_options():
    code = "from tensorlang import ad; print(ad.grad(lambda x: x * x * x)(2.0))"
    assert _run(code, "-W", "ignore", "-B") == "12.0\n"
    done = subprocess.run([sys.executable, "-Bc" + code], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.stdout == "12.0\n", done.stderr


def test_python_c_records_a_function_exec_d_inside_it():
    code = ("from tensorlang import ad\n"
            "g = lambda x: x * x\n"
            "ns = {}\n"
            "exec('f = lambda x: x * 2.0 * x', ns)\n"
            "print(ad.grad(ns['f'])(1.5), ad.code_source(ns['f']).origin, ad.code_source(g).origin)\n")
    assert _run(code) == "6.0 recording python -c\n"


def test_a_script_piped_to_python_is_recorded():
    done = subprocess.run([sys.executable], input="from tensorlang import ad\nf = lambda x: x * x\n"
                          "print(ad.grad(f)(3.0), ad.code_source(f).origin)\n",
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.stdout == "6.0 recording\n", done.stderr


# the interactive prompt ---------------------------------------------------------------------------------------

class Prompt:
    """The plain interactive interpreter, its standard streams a pseudo-terminal; every read has a deadline."""

    def __init__(self, home):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP", "PYTHONINSPECT")}
        env.update(HOME=str(home), TERM="dumb")    # a history file of its own
        master, slave = os.openpty()
        self.fd, self.out = master, b""
        self.proc = subprocess.Popen([sys.executable, "-q"], stdin=slave, stdout=slave, stderr=slave, env=env,
                                     close_fds=True, start_new_session=True)
        os.close(slave)
        self.read_until(b">>> ")

    def read_until(self, token: bytes) -> bytes:
        deadline = time.monotonic() + TIMEOUT
        while token not in self.out:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no {token!r} from the prompt; it wrote {self.out[-2000:]!r}")
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:   # the interpreter has exited
                chunk = b""
            if not chunk:
                raise EOFError(f"the prompt exited before {token!r}; it wrote {self.out[-2000:]!r}")
            self.out += chunk
        i = self.out.index(token) + len(token)
        seen, self.out = self.out[:i], self.out[i:]
        return seen

    def type(self, *lines: str) -> str:
        """Type ``lines`` (a statement; a compound one ends with an empty line); what it printed."""
        seen = b""
        for line in lines:
            os.write(self.fd, line.encode() + b"\n")
            seen += self.read_until(b"... " if len(lines) > 1 and line else b">>> ")
        return seen.decode()

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        os.close(self.fd)


@pytest.fixture
def prompt(tmp_path):
    p = Prompt(tmp_path)
    yield p
    p.close()


def _result(printed: str) -> str:
    """The line that ``print("=" + "R", ...)`` wrote (the echo of the typed line has no ``=R``)."""
    return next(line for line in printed.splitlines() if line.startswith("=R ")).strip()


def test_the_interactive_prompt(prompt):
    prompt.type("from tensorlang import ad")
    prompt.type("def f(x):",
                "    s = 0.0",
                "    for i in range(4):",
                "        if i % 2 == 0:",
                "            s = s + x * x",
                "        else:",
                "            s = s + x",
                "    return s",
                "")                                           # 2x^2 + 2x: 4x + 2
    prompt.type("g = lambda x: x * x * x")
    out = prompt.type('print("=" + "R", ad.grad(f)(2.0), ad.grad(g)(2.0), ad.grad(lambda x: 7.0 * x)(1.0), '
                      'ad.code_source(f).origin)')
    assert _result(out) == "=R 10.0 12.0 7.0 REPL history"


def test_the_prompt_tells_apart_functions_of_the_same_shape(prompt):
    prompt.type("from tensorlang import ad")
    prompt.type("def f(x):", "    return x * 2.0", "")
    prompt.type("old = f")
    prompt.type("def f(x):", "    return x * 3.0", "")
    out = prompt.type('print("=" + "R", ad.grad(old)(1.0), ad.grad(f)(1.0))')
    assert _result(out) == "=R 2.0 3.0"


# exec, eval, compile, notebooks ---------------------------------------------------------------------------------

SRC = "def f(x):\n    y = x\n    for _ in range(2):\n        y = y * x\n    return y\n"   # x^3


def test_exec_d_text_is_recorded():
    ns = {}
    exec(SRC, ns)
    assert ad.grad(ns["f"])(2.0) == 12.0 and ad.code_source(ns["f"]).origin == "recording"
    assert ad.grad(eval("lambda x: x * x"))(2.0) == 4.0
    exec(compile(SRC, "<mine>", "exec"), ns)
    assert ad.grad(ns["f"])(2.0) == 12.0 and ad.code_source(ns["f"]) == ("recording", "<mine>", 1, "")


def test_ad_define():
    ns = ad.define(SRC)
    assert ad.grad(ns["f"])(2.0) == 12.0
    source = ad.code_source(ns["f"])
    assert source.origin == "linecache" and source.text == SRC.rstrip("\n") and source.line == 1
    ns = ad.define("k = 4.0\nh = lambda x: k * x * x\n", {"unused": 1})
    assert ad.grad(ns["h"])(3.0) == 24.0 and ns["unused"] == 1


def test_ad_define_and_exec_of_the_same_text_coexist():
    mine = ad.define(SRC)
    theirs = {}
    exec(SRC, theirs)
    assert ad.grad(mine["f"])(3.0) == 27.0 and ad.code_source(mine["f"]).origin == "linecache"
    assert ad.grad(theirs["f"])(3.0) == 27.0 and ad.code_source(theirs["f"]).origin == "recording"


def test_source_file_origin():
    def f(x):
        return x * x
    source = ad.code_source(f)
    assert source.origin == "file" and source.filename == __file__
    assert source.text == "def f(x):\n        return x * x"


def test_notebook_cells():
    pytest.importorskip("IPython")
    cell = ("from tensorlang import ad\n"
            "def f(x):\n"
            "    return x ** 3 + 2.0 * x\n"
            "print('=R', ad.grad(f)(2.0), ad.grad(lambda x: x * x)(5.0), ad.code_source(f).origin)\n")
    out = _run("from IPython.core.interactiveshell import InteractiveShell\n"
               f"InteractiveShell.instance().run_cell({cell!r}).raise_error()\n")
    assert _result(out) == "=R 14.0 10.0 linecache"


def test_generated_code_is_kept_as_text_and_parsed_only_when_differentiated_again():
    """The code tensorlang.ad generates is registered with its text and the name of its definition, not a
    syntax tree (a test process that differentiates thousands of functions kept millions of tree nodes);
    the tree is parsed when a higher derivative transforms that code, and that derivative is right."""
    import numpy as np

    from tensorlang.derive.ad import source

    def damped(x):
        return np.sin(x) * x * x

    assert ad.grad(damped)(0.7) == pytest.approx(np.cos(0.7) * 0.49 + 2 * 0.7 * np.sin(0.7))
    mine = [entry for entry in source._REGISTRY.values() if "damped" in entry[2]]
    assert mine and all(isinstance(entry[1], str) for entry in mine)
    x, h = 0.7, 1e-5
    central = (ad.grad(damped)(x + h) - ad.grad(damped)(x - h)) / (2 * h)
    assert ad.grad(ad.grad(damped))(x) == pytest.approx(central, rel=1e-6)
    assert ad.grad(ad.grad(ad.grad(damped)))(x) == pytest.approx(
        (ad.grad(ad.grad(damped))(x + h) - ad.grad(ad.grad(damped))(x - h)) / (2 * h), rel=1e-5)
    parsed = [entry for entry in source._REGISTRY.values() if "damped" in entry[2] and not isinstance(entry[1], str)]
    assert parsed and all(entry[1].name in entry[3] for entry in parsed)
