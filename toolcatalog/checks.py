"""System checks: sandbox settings that cannot work, fell back, or could be stronger."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security)
def check_sandbox_available(app_configs=None, **kwargs):
    """NETA_SANDBOX=bwrap must actually work here, or every bash call would fail."""
    if getattr(settings, "NETA_SANDBOX", "auto") != "bwrap":
        return []
    from toolcatalog.sandbox import bwrap_status

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
    from toolcatalog.sandbox import effective_sandbox

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
    from toolcatalog.sandbox import bwrap_status

    if not bwrap_status().available:
        return []
    return [
        checks.Warning(
            "bash tool commands run unsandboxed (NETA_SANDBOX=none) although bubblewrap works here.",
            hint="Set NETA_SANDBOX=auto or bwrap to confine commands to the workspace (see docs/tools.md).",
            id="toolcatalog.W001",
        )
    ]
