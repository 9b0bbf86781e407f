"""Hypothesis profiles for the suite.

``make test`` (and CI) runs the ``repeatable`` profile: every property test draws the same examples in
every run (``derandomize``), so a run's verdict does not depend on the draw.  ``HYPOTHESIS_PROFILE=explore
make test`` draws new examples each run, to look for counterexamples the fixed draws miss (a failure it
finds is printed with the example; add it as a regression test).
"""
import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

if settings().derandomize:
    # Hypothesis also draws literal constants it finds in the source of every loaded local module, so
    # any edit anywhere in the package (or a different set of imported modules) would change the
    # "repeatable" draws; with no local constants the draws depend on the strategies alone.
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: providers._local_constants

