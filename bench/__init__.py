"""Neta's benchmarks (not tests): they print figures and ratios, never assert timings.

    python -m bench              # the session-tree kernel's benchmarks
    python -m bench NAME ...     # any benchmark module of this package; "all" for every one
    python -m bench.<name>       # one, with its own options

The kernel's benchmarks run on throw-away storage under ``var/bench/`` (see
``bench/environment.py``); their figures are in ``bench/README.md``.
"""
