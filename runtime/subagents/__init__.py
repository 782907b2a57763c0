"""Subagents as separate OS processes (docs/subagents.md).

``envelope`` (the task a child gets), ``protocol`` (the JSONL events between child and
host), ``child`` (the child process, ``python -m runtime.subagents.child``) and
``supervisor`` (the host side that starts, watches, cancels and reaps one child).
None of them touches the database; the records and the tree are the caller's.
"""
