"""``bash``: run a shell command in the workspace, contained, limited and scrubbed.

Arguments as in Pi (``command``, ``timeout`` in seconds, default 180). The
command runs in the context's cwd with an environment scrubbed of the server's
secrets, in its own process group (and cgroup when available), under
bubblewrap when the context's sandbox is ``bwrap`` (the protected paths masked,
and refused while a root holds a file hard-linked from outside). Output (stdout and stderr
interleaved) is truncated from the head like Pi's: the last 2000 lines / 50 KB
are returned and the full output is kept in a file named in the result.
Partial output streams through ``ctx.on_progress``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from toolcatalog.command_output import CommandOutput
from toolcatalog.environment import scrub_environment
from toolcatalog.manifest import ToolManifest
from toolcatalog.protected_paths import outside_hard_links
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.sandbox import (
    SANDBOX_HOME,
    ProcessLimits,
    SandboxUnavailable,
    bwrap_argv,
    run_command,
    shell_argv,
)
from toolcatalog.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size

DEFAULT_TIMEOUT = 180.0
PROGRESS_INTERVAL = 0.25
MAX_COMMAND_BYTES = 256 * 1024


def refuse_outside_links(ctx: ToolContext) -> None:
    """Under bwrap: refuse to start while a root holds a file hard-linked from outside the roots.

    Inside the sandbox such a file *is* the outside file (a bind mount shows the
    inode, whatever its other names), so a link made while the sandbox was off
    would carry, say, the server's secret key into the sandbox. A sandboxed
    command cannot make new ones: ``link()`` across bind mounts fails (EXDEV),
    and nothing outside the roots is visible to it.
    """
    scan = outside_hard_links(ctx.roots)
    if scan.offenders:
        raise ToolError(
            "Refused to run the command: the workspace holds files hard-linked to files outside it "
            f"({', '.join(scan.offenders)}). Inside the sandbox they would be those outside files. "
            "Remove these links (or ask an operator to) and try again.",
            details={"hardLinkedFiles": list(scan.offenders)},
        )


class BashTool(Tool):
    name = "bash"
    label = "bash"
    description = (
        "Execute a bash command in the current working directory. Returns stdout and stderr. Output is "
        f"truncated to last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit "
        "first). If truncated, full output is saved to a file. Timeout defaults to 180 seconds; pass a "
        "timeout in seconds for a longer limit. Processes the command leaves running are stopped when it ends."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "Bash command to execute"},
            "timeout": {
                "type": "number",
                "minimum": 0,
                "description": "Timeout in seconds (default 180; 0 means the longest the server allows)",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(
        kind="builtin",
        execution_mode="subprocess",
        requires_shell=True,
        requires_write=True,
    )

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        command: str = args["command"]
        try:
            encoded = command.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("command contains a lone surrogate; it is not valid Unicode") from None
        if "\x00" in command:
            raise ToolError("command contains a NUL byte")
        if len(encoded) > MAX_COMMAND_BYTES:
            raise ToolError(f"command is {format_size(len(encoded))}; the limit is {format_size(MAX_COMMAND_BYTES)}")
        limits = ProcessLimits.from_settings()
        requested = args.get("timeout")
        timeout = DEFAULT_TIMEOUT if requested is None else float(requested)
        if timeout == 0 or timeout > limits.max_timeout:
            timeout = limits.max_timeout

        env = scrub_environment(os.environ, passthrough=ctx.env_passthrough)
        argv = shell_argv(command)
        if ctx.sandbox == "bwrap":
            env["HOME"] = SANDBOX_HOME
            env["TMPDIR"] = "/tmp"
            try:
                argv = bwrap_argv(
                    roots=ctx.roots, cwd=ctx.cwd, network=ctx.network, command=argv, protected=ctx.protected
                )
            except SandboxUnavailable as exc:
                raise ToolError(str(exc)) from None
            refuse_outside_links(ctx)

        output = CommandOutput(output_dir=ctx.output_dir)
        last_progress = 0.0

        def on_output(chunk: bytes) -> None:
            nonlocal last_progress
            output.append(chunk)
            if ctx.on_progress is not None:
                now = time.monotonic()
                if now - last_progress >= PROGRESS_INTERVAL:
                    last_progress = now
                    ctx.progress(ToolResult.text(output.truncation().content))

        try:
            outcome = run_command(
                argv, cwd=ctx.cwd, env=env, timeout=timeout, cancel=ctx.cancel, on_output=on_output, limits=limits
            )
        finally:
            output.close()

        trunc = output.truncation()
        text = trunc.content
        details: dict[str, Any] = {
            "exitCode": outcome.exit_code,
            "sandbox": ctx.sandbox,
            "containment": outcome.containment,
            "durationMs": int(outcome.duration * 1000),
        }
        if trunc.truncated:
            details["truncation"] = trunc.to_details()
            where = str(output.saved_path) if output.saved_path else "not kept"
            if output.saved_path is not None:
                details["fullOutputPath"] = where
                if output.saved_capped:
                    details["fullOutputCapped"] = True
            first = trunc.total_lines - trunc.output_lines + 1
            last = trunc.total_lines
            if trunc.last_line_partial:
                text += (
                    f"\n\n[Showing last {format_size(trunc.output_bytes)} of line {last}. Full output: {where}]"
                )
            elif trunc.truncated_by == "lines":
                text += f"\n\n[Showing lines {first}-{last} of {trunc.total_lines}. Full output: {where}]"
            else:
                text += (
                    f"\n\n[Showing lines {first}-{last} of {trunc.total_lines} "
                    f"({format_size(DEFAULT_MAX_BYTES)} limit). Full output: {where}]"
                )
        if outcome.killed_leftovers:
            details["stoppedBackgroundProcesses"] = outcome.killed_leftovers

        def status(line: str) -> str:
            return f"{text}\n\n{line}" if text else line

        if outcome.cancelled:
            details["cancelled"] = True
            return ToolResult.error(status("Command aborted"), details=details)
        if outcome.timed_out:
            details["timedOut"] = True
            return ToolResult.error(status(f"Command timed out after {timeout:g} seconds"), details=details)
        if outcome.limit_hit == "processes":
            details["limitHit"] = "processes"
            return ToolResult.error(
                status(f"Command stopped: it tried to run more than {limits.max_processes} processes at once"),
                details=details,
            )
        if outcome.exit_code not in (0, None):
            if outcome.exit_code == 128 + 25:  # SIGXFSZ
                details["limitHit"] = "file_size"
                return ToolResult.error(
                    status(
                        f"Command exited with code {outcome.exit_code} "
                        f"(a file grew past the {format_size(limits.max_file_bytes)} size limit)"
                    ),
                    details=details,
                )
            return ToolResult.error(status(f"Command exited with code {outcome.exit_code}"), details=details)
        return ToolResult.text(text or "(no output)", details=details)
