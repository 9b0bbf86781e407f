"""Hypothesis profiles for the suite.

``make test`` (and CI) runs the ``repeatable`` profile: every property test draws the same examples in
every run (``derandomize``), so a run's verdict does not depend on the draw.  ``HYPOTHESIS_PROFILE=explore
make test`` draws new examples each run, to look for counterexamples the fixed draws miss (a failure it
finds is printed with the example; add it as a regression test).
"""
import os

from hypothesis import settings

from strategies import without_local_constants

settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

if settings().derandomize:
    # the "repeatable" draws depend on the strategies alone, not on what the process has imported
    without_local_constants()

