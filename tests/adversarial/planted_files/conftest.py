"""Planted next to attention.py: the grader must never run this file (adversarial suite).

If it ran, bytes_to_mib in attention.py would divide by 2**20 and be right, and
a marker file would show that it ran.
"""

import builtins

builtins._ADV_MIB = 2**20
try:
    with open("/tmp/grader-adversarial-planted-ran-conftest", "w") as fh:
        fh.write("conftest.py ran\n")
except OSError:
    pass
