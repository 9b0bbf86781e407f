"""The rule library, apart from the core transform: scalar rules inlined into generated code
(``scalar``), operators on values of unknown kind (``operators``), data structures and mutation
(``structures``), ``math``, Python builtins, NumPy (elementwise functions and reductions in ``numpy``,
functions that move entries in ``layout``, contractions and ``numpy.linalg`` in ``linalg``), and complex
numbers (``complexes``).  Importing the package registers them all."""
from . import builtins, layout, linalg, math, numpy, operators, scalar, structures  # noqa: F401
from . import complexes  # noqa: F401,E402  (after the rules it puts in the complex convention)
