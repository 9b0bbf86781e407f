"""tensorlang as a GradBench tool: ``python -m tensorlang.gradbench`` answers GradBench's evals (the
programs AD tools are compared on) over JSON lines on stdin/stdout.

One module per eval (``hello``, ``lse``, ``llsq``): each holds its programs in the tensor language, compiled
with their certified gradients when the eval's ``define`` arrives (the compilation is reported as the
``define`` time, as GradBench's JAX tool reports ``jit``), and a ``FUNCTIONS`` table from the eval's function
names to ``Function``s (``runs``).  The protocol loop is ``__main__``.
"""
EVALS = ("hello", "lse", "llsq")
