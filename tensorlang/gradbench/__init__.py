"""tensorlang as a GradBench tool: ``python -m tensorlang.gradbench`` answers GradBench's evals (the
programs AD tools are compared on) over JSON lines on stdin/stdout.

One module per eval (``hello``, ``lse``, ``llsq``, ``kmeans``, ``det``, ``ode``, ``gmm``, ``ba``, ``ht``,
``lstm``, ``particle``, ``saddle``; ``descent`` is the gradient descent of the last two): its ``define()``
compiles the eval's tensor programs with their certified gradients (the time GradBench reports for
``define``, as it does for JAX's ``jit``), or prepares the Python that ``tensorlang.ad`` differentiates where the language cannot express the
program, and returns a table from the eval's function names to ``runs.Function``s.  The protocol loop is
``__main__``.
"""
EVALS = ("hello", "lse", "llsq", "kmeans", "det", "ode", "gmm", "ba", "ht", "lstm", "particle", "saddle")
