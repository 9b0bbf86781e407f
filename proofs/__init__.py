"""Proof obligations of every rewrite rule, checked on generated instances."""
