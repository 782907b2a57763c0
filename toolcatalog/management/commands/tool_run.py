"""``manage.py tool_run NAME --args JSON [--cwd DIR] [--root DIR ...]``

Runs one tool the way the runtime would — same projection (governance + the
given policy), same workspace confinement, same sandbox — and prints the result
as JSON (``content``, ``details``, ``isError``). Exit status: 0 when the tool
succeeded, 1 when it returned an error result, 2 for bad input (message on
stderr, nothing run). Ctrl-C cancels a running tool.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from toolcatalog.policy import PolicyError, ToolPolicy
from toolcatalog.protocol import UnknownTool, get_tool, tool_names
from toolcatalog.services import tool_run_once


class Command(BaseCommand):
    help = "Run one tool with JSON arguments in a workspace and print the result as JSON."
    requires_system_checks: list = []

    def add_arguments(self, parser):
        parser.add_argument("name", help="tool name, e.g. read, bash")
        parser.add_argument("--args", dest="tool_args", default="{}", help="tool arguments as a JSON object")
        parser.add_argument("--cwd", help="working directory (default: the first root)")
        parser.add_argument("--root", action="append", default=[], help="workspace root (repeatable; default: --cwd or .)")
        parser.add_argument("--policy", help="agent tool policy as JSON (default: the default policy)")
        parser.add_argument("--sandbox", choices=["auto", "none", "bwrap"], help="override NETA_SANDBOX (default: its effective mode)")

    def handle(self, *args, **options):
        name = options["name"]
        try:
            get_tool(name)
        except UnknownTool:
            raise CommandError(f"unknown tool {name!r}; known tools: {', '.join(tool_names())}", returncode=2) from None
        try:
            tool_args = json.loads(options["tool_args"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--args is not valid JSON: {exc}", returncode=2) from None
        if not isinstance(tool_args, dict):
            raise CommandError("--args must be a JSON object", returncode=2)
        policy = None
        if options["policy"]:
            try:
                policy = ToolPolicy.from_dict(json.loads(options["policy"]))
            except json.JSONDecodeError as exc:
                raise CommandError(f"--policy is not valid JSON: {exc}", returncode=2) from None
            except PolicyError as exc:
                raise CommandError(f"--policy is invalid: {exc}", returncode=2) from None
        roots = options["root"] or [options["cwd"] or os.getcwd()]
        for root in roots:
            if not os.path.isdir(root):
                raise CommandError(f"--root {root!r} is not a directory", returncode=2)
        cancel = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
        try:
            projection, result = tool_run_once(
                name=name,
                args=tool_args,
                roots=roots,
                cwd=options["cwd"],
                policy=policy,
                sandbox=options["sandbox"],
                cancel=cancel,
            )
        except ValueError as exc:  # bad roots/cwd
            raise CommandError(str(exc), returncode=2) from None
        except DatabaseError as exc:
            raise CommandError(f"cannot read tool governance (ToolConfig) — run migrate? {exc}", returncode=2) from None
        finally:
            signal.signal(signal.SIGINT, previous)
        decision = projection[name]
        if not decision.effective:
            raise CommandError(f"tool {name!r} is not available: {decision.reason} (source: {decision.source})",
                               returncode=2)
        payload = {"tool": name, **result.to_dict()}
        self.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2))
        if result.is_error:
            sys.exit(1)
