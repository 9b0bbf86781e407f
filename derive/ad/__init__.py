"""The SSA AD layer (tensorlang.ad): reverse mode for Python functions, by source transformation."""
__all__ = []
