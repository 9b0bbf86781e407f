"""Derivatives (section 6 of the paper): the forward derivative of Fig. 13, the adjoint by inner-product
rewriting of Fig. 14-16 with the extended cost of Fig. 17, their simplification, and the SSA AD layer
for Python functions (``derive/ad``, public as ``tensorlang.ad``)."""
