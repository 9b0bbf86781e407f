"""``tensorlang.ad``: the public name of the SSA AD layer, which lives in ``tensorlang.derive.ad``."""
from .derive.ad import *  # noqa: F401,F403
from .derive.ad import __all__  # noqa: F401
