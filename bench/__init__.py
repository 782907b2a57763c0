"""Neta's benchmarks (not tests): they print figures and ratios, never assert timings.

    python -m bench [cold_open] [warm_append] [mysql_provider] [snapshot]
    python -m bench.<name>

Everything runs on throw-away storage under ``var/bench/`` (see
``bench/environment.py``); results are described in ``bench/README.md``.
"""
