"""System checks: sandbox settings that cannot work, fell back, or could be stronger."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from toolcatalog import web_guard
from toolcatalog.sandbox import bwrap_status, effective_sandbox
from toolcatalog.web_search_backends import search_config


@checks.register(checks.Tags.security)
def check_sandbox_available(app_configs=None, **kwargs):
    """NETA_SANDBOX=bwrap must actually work here, or every bash call would fail."""
    if getattr(settings, "NETA_SANDBOX", "auto") != "bwrap":
        return []

    status = bwrap_status()
    if status.available:
        return []
    return [
        checks.Error(
            f"NETA_SANDBOX=bwrap, but {status.reason}.",
            hint="Install bubblewrap and allow user namespaces, or set NETA_SANDBOX=auto or none.",
            id="toolcatalog.E001",
        )
    ]


@checks.register(checks.Tags.security)
def check_sandbox_fallback(app_configs=None, **kwargs):
    """NETA_SANDBOX=auto found no working bubblewrap: commands run unsandboxed."""
    if getattr(settings, "NETA_SANDBOX", "auto") != "auto":
        return []

    choice = effective_sandbox()
    if not choice.fell_back:
        return []
    return [
        checks.Warning(
            f"NETA_SANDBOX=auto: bash tool commands run without a sandbox (none), because {choice.reason}.",
            hint=(
                "Install bubblewrap and allow unprivileged user namespaces to confine commands to the workspace, "
                "or set NETA_SANDBOX=none to accept running unsandboxed (docs/tools.md)."
            ),
            id="toolcatalog.W002",
        )
    ]


@checks.register(checks.Tags.security, deploy=True)
def check_sandbox_used(app_configs=None, **kwargs):
    """``check --deploy``: bubblewrap works here but commands run unsandboxed."""
    if getattr(settings, "NETA_SANDBOX", "auto") != "none":
        return []

    if not bwrap_status().available:
        return []
    return [
        checks.Warning(
            "bash tool commands run unsandboxed (NETA_SANDBOX=none) although bubblewrap works here.",
            hint="Set NETA_SANDBOX=auto or bwrap to confine commands to the workspace (see docs/tools.md).",
            id="toolcatalog.W001",
        )
    ]


@checks.register()
def check_web_tools(app_configs=None, **kwargs):
    """A search backend selected but unusable, and allow/deny entries that cannot be read."""
    found = []
    config = search_config()
    if config.configured and config.problem:
        found.append(
            checks.Warning(
                f"NETA_WEB_SEARCH_BACKEND={config.backend}, but {config.problem}: web_search is not offered to any agent.",
                hint="Fix the setting (docs/tools.md, \"Web tools\"), or unset NETA_WEB_SEARCH_BACKEND.",
                id="toolcatalog.W003",
            )
        )
    try:
        web_guard.policy_from_settings()
    except ValueError as exc:
        found.append(
            checks.Error(
                f"{exc}: web_fetch and web_search refuse every request until it is fixed.",
                hint="Entries are hosts or host:port (NETA_WEB_FETCH_ALLOW); the deny list also takes *.domain and CIDR ranges.",
                id="toolcatalog.E002",
            )
        )
    return found
