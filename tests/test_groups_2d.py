"""Statement groups over temporaries of several dimensions (``codegen.groups``, ``Schedule.emit_group``):
the temporary computed in chunks of rows (as many as fit the group's buffer with the readers' reach) with
the gathers and the small-target reductions that read it, compared with the reference evaluator, with
the statements run one after another (a row too long for the buffer), and with 1 and 2 threads."""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import compile as tl_compile
from tensorlang.codegen.schedule import GROUP_BUFFER
from test_codegen_gradients import CONV2D, _same_with_1_and_2_threads, close

# a temporary (a sum: not inlined into its readers) read in rows behind and ahead of the chunk by a
# gather, and by a reduction into a small target of two dimensions (its chunk variable the first of two sums)
ROWS = """
x : [n + 2][p + 1]R
y : [n][p]R
let f = gen(i:n + 2, j:p) sum(t:2) tanh(x[i, j + t]) * x[i, j] in
(gen(k:n, j:p) f[k, j] * f[k + 2, j] - f[k + 1, j], gen(a:3, b:2) sum(i:n, j:p) [b <= j] * f[i + a, j - b] * y[i, j])
"""


def _rows_per_chunk(row: int, reach: int) -> int:
    return max(1, GROUP_BUFFER // row - reach)


@pytest.mark.parametrize("n", [0, 1, 4, 5, 6, 40, 300])
def test_convolution_gradients_in_chunks_of_rows(n):
    """dX, dx (reading dX[k0 - a, k1 - b]) and dw (sum over dX's rows) in chunks of rows: n = 300 is
    three chunks of 102 rows (rows of 308 elements, a reach of 4), the last one partial."""
    m = 5
    e = tl.parse(CONV2D)
    r = np.random.default_rng(n)
    ins = {"x": r.standard_normal((n + m - 1, n + m - 1)), "w": r.standard_normal((m, m)),
           "z": r.standard_normal((n, n))}
    for wrt in (["x", "w"], "w", "x"):
        g = tl.grad(e, wrt)
        k = tl_compile(g)
        assert "in chunks" in k.source, wrt
        assert close(k(**ins), tl.evaluate(g, **ins)), (n, wrt)
    assert n < 300 or -(-n // _rows_per_chunk(n + 8, m - 1)) == 3


@pytest.mark.parametrize("n, p", [(0, 3), (1, 1), (3, 2), (10, 7), (400, 100), (2, GROUP_BUFFER + 5)])
def test_rows_read_behind_and_ahead(n, p):
    """A gather reading rows k, k + 1, k + 2 and a reduction reading rows i .. i + 2 (shifted columns):
    several chunks at p = 100 (row 108, 301 rows per chunk); at p = GROUP_BUFFER + 5 one row does not fit
    the buffer and the statements run one after another."""
    e = tl.parse(ROWS)
    r = np.random.default_rng(n + p)
    ins = {"x": r.standard_normal((n + 2, p + 1)), "y": r.standard_normal((n, p))}
    k = tl_compile(e)
    assert "in chunks" in k.source
    assert close(k(**ins), tl.evaluate(e, **ins)), (n, p)


_THREADS_SCRIPT = """
import hashlib
import numpy as np
import tensorlang as tl
r = np.random.default_rng(2)
n, p = 3000, 700  # past the work at which the chunks run on several threads
x, y = r.standard_normal((n + 2, p + 1)), r.standard_normal((n, p))
out = tl.compile(tl.parse(open(__import__("sys").argv[1]).read()))(x=x, y=y)
print(hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in out)).hexdigest())
"""


def test_chunks_of_rows_are_the_same_bits_with_any_number_of_threads(tmp_path):
    (tmp_path / "rows.tl").write_text(ROWS)
    assert _same_with_1_and_2_threads(tmp_path, _THREADS_SCRIPT, tmp_path / "rows.tl")


_RUNS_SCRIPT = """
import hashlib
import numpy as np
import tensorlang as tl
from test_codegen_gradients import close
e = tl.parse(open(__import__("sys").argv[1]).read())
r = np.random.default_rng(5)
n, p = 400, 1000
x, y = r.standard_normal((n + 2, p + 1)), r.standard_normal((n, p))
out = tl.compile(e)(x=x, y=y)
assert close(out, tl.evaluate(e, x=x, y=y))
print(hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in out)).hexdigest())
"""


def test_runs_of_chunks_sharing_a_buffer(tmp_path):
    """Rows of 1008 elements: chunks of 30 rows, 14 of them at n = 400; on one thread runs of 3 chunks
    share a buffer (the last run of 2), each row computed once; on two threads runs of one chunk: equal
    to the evaluator and the same bits either way."""
    import sys
    from pathlib import Path

    (tmp_path / "rows.tl").write_text(ROWS)
    sys_path = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    assert _same_with_1_and_2_threads(tmp_path, sys_path + _RUNS_SCRIPT, tmp_path / "rows.tl")
