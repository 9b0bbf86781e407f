"""The pullback of ``x[i]`` adds into one indexed cotangent, so the gradient of a loop that reads every
entry costs O(n): its time over the forward's does not grow with n (with a dense zero array per read it
would grow like n).  A loose check, robust to load: best of several interleaved rounds, 4n against n."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_ad_index import ratio, sum_of_squares  # noqa: E402

from tensorlang import ad  # noqa: E402


def test_indexed_reads_give_the_exact_gradient():
    x = np.random.default_rng(1).normal(size=50)
    np.testing.assert_allclose(ad.gradient(sum_of_squares, x)[0], 2 * x)


def test_gradient_over_forward_does_not_grow_with_n():
    small = ratio(2000, rounds=7)[2]
    large = ratio(8000, rounds=7)[2]
    assert large < 2 * small, (small, large)
