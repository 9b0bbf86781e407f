"""``python -m proofs``: check every rule's obligations and print a table; non-zero exit on failure."""
import sys

print("no rules registered yet")
sys.exit(0)
