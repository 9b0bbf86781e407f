"""``make bench``: every benchmark, one after the other; each prints ratios measured in its own run (what
the benchmarks share, their command line and timing, is ``harness.py``)."""
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["bench_evaluator.py", "bench_normalize.py", "bench_call.py", "bench_ad.py", "bench_ad_lstm.py", "bench_ad_vmap.py", "bench_codegen.py", "bench_gmm.py", "bench_gather.py", "bench_sparse.py", "bench_sparse_hessian.py", "bench_dask_memory.py", "bench_dask_scaling.py", "bench_gradbench.py"]

for name in BENCHMARKS:
    print(f"\n=== {name} ===", flush=True)
    sys.argv = [str(HERE / name)]
    runpy.run_path(str(HERE / name), run_name="__main__")
