import os
import sys
from pathlib import Path

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

# Processes that serve the ASGI application (and so run inline turns).
ASGI_SERVERS = {"daphne", "uvicorn", "hypercorn", "gunicorn"}


def serves_asgi(argv: list[str] | None = None) -> bool:
    """Is this process an ASGI server (``daphne …``, ``python -m daphne …``, ``python -m neta.serve``, ``manage.py
    runserver``)? Management commands (migrate, shell, runtime_reap), test runs and Celery
    workers are not."""
    argv = sys.argv if argv is None else argv
    if not argv:
        return False
    program = Path(argv[0])
    if program.name in ASGI_SERVERS or (program.name == "__main__.py" and program.parent.name in ASGI_SERVERS):
        return True
    if program.name == "serve.py" and program.parent.name == "neta":  # python -m neta.serve (make run)
        return True
    if program.name == "manage.py" and argv[1:2] == ["runserver"]:
        # With the autoreloader only the child (RUN_MAIN) serves; the parent just watches files.
        return os.environ.get("RUN_MAIN") == "true" or "--noreload" in argv
    return False


class RuntimeConfig(AppConfig):
    name = "runtime"
    verbose_name = _("Agents, models and runs")

    def ready(self):
        # Imports here, not at the top: Django loads app code only once the app registry is ready.
        from runtime import checks  # noqa: F401 - registers the runtime system checks

        # The realtime gateway: tree events (after commit) and streaming events go to
        # the session's Channels group, from whichever process produced them; sockets
        # whose rights went are closed or re-checked.
        from runtime.gateway import access
        from runtime.realtime import publisher  # app code loads in ready(), once every app's models are

        publisher.install()
        access.install()

        # No tool is handed a provider key a model sends (toolcatalog.environment).
        from runtime.agents.keys import tool_key_names
        from toolcatalog.environment import set_key_names  # app code loads in ready(), once every app's models are

        set_key_names("models", tool_key_names)

        # The delegate tools (offered only to agents whose subagent policy enables them).
        from runtime.subagents.tools import register_delegate_tools

        register_delegate_tools()
        from runtime.runs.reaper import add_round_hook  # app code loads in ready(), once every app's models are
        from runtime.subagents.services import subprocess_runs_reap  # app code loads in ready(), once every app's models are

        add_round_hook(subprocess_runs_reap)
        from runtime.subagents.child_approvals import (
            reap as subagent_approvals_reap,  # app code loads in ready(), once every app's models are
        )

        add_round_hook(subagent_approvals_reap)
        from runtime.runs.reaper import add_batch_settler  # app code loads in ready(), once every app's models are
        from runtime.subagents.host import settle_lost_batch  # app code loads in ready(), once every app's models are

        add_batch_settler(settle_lost_batch)

        # Crash recovery: a web process that runs turns itself (inline backend) reaps at
        # start-up the runs its dead predecessors left, and then on a timer. Celery
        # workers start the same timer from neta/celery.py.
        from django.conf import settings

        if serves_asgi():
            # The sandbox probe now, so a fallback to none is in the log at start-up
            # (docs/tools.md), not only after the first command.
            from toolcatalog.sandbox import effective_sandbox

            effective_sandbox()
            # MCP servers list their tools at start-up, on a background thread (docs/tools.md).
            from toolcatalog.services import mcp_servers_discover_in_background

            mcp_servers_discover_in_background()
        if settings.NETA_TASK_BACKEND == "inline" and serves_asgi():
            from runtime.runs.reaper import start_reaper_timer  # app code loads in ready(), once every app's models are

            start_reaper_timer()
