"""The two skill tools: ``read_skill(name)`` and ``read_skill_file(name, path)``.

Both are ordinary tools of the tool catalog. They honour the caller's skill
policy, the typed field ``ToolContext.skill_policy`` (a parsed
:class:`~skills_registry.policy.SkillPolicy`; None means the default policy),
and ``ToolContext.for_subagent`` (``True`` inside a subagent). A skill the
caller may not use is answered exactly like a skill that does not exist.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolManifest, ToolResult, register_tool

from skills_registry import conf
from skills_registry.confinement import ConfinementError, read_confined
from skills_registry.frontmatter import strip_frontmatter
from skills_registry.policy import SkillPolicy
from skills_registry.selectors import (
    SkillUnavailable,
    skill_entry_name,
    skill_file_paths,
    skill_get_for_caller,
)

# The tools read registry rows, so in a subagent's worker process they run in the
# main process (which has the database) rather than inside the worker.
_MANIFEST = ToolManifest(
    kind="skill",
    execution_mode="in-process",
    requires_skill_scope=True,
    supported_in_worker=False,
    default_route="main-process-proxy",
)
_FILES_SHOWN = 50
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _caller_skill(ctx: ToolContext, name: str):
    policy = SkillPolicy() if ctx.skill_policy is None else ctx.skill_policy
    if not isinstance(policy, SkillPolicy):  # another policy-like object: not ours to interpret
        raise ToolError(f"The caller's skill policy is a {type(policy).__name__}, not a SkillPolicy")
    try:
        return skill_get_for_caller(name=name, policy=policy, for_subagent=ctx.for_subagent)
    except SkillUnavailable as exc:
        raise ToolError(str(exc)) from None


def _image_type(data: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ReadSkillTool(Tool):
    name = "read_skill"
    changes = False
    label = "Read skill"
    description = (
        "Load a skill's instructions by its exact name (as listed in <available_skills>). "
        "Returns the skill's SKILL.md without its frontmatter, and the names of files the skill "
        "ships, which read_skill_file can load."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 255, "description": "The skill's name."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    manifest = _MANIFEST

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        skill = _caller_skill(ctx, args["name"])
        if skill.disable_model_invocation:
            raise ToolError(
                f"Skill {skill.name!r} can only be invoked by the user (/skill:{skill.name}); it is not for the model to load."
            )
        try:
            data = read_confined(skill.base_dir, skill_entry_name(skill), max_bytes=conf.max_entry_bytes())
        except ConfinementError as exc:
            raise ToolError(f"Skill {skill.name!r} cannot be read: {exc}") from None
        body = strip_frontmatter(data.decode("utf-8", "replace"))
        recorded = {f.get("path"): f.get("sha256") for f in skill.files}
        changed = recorded.get(skill_entry_name(skill)) != hashlib.sha256(data).hexdigest()
        files = skill_file_paths(skill)
        content = [{"type": "text", "text": body}]
        if files:
            shown = ", ".join(files[:_FILES_SHOWN])
            more = f" and {len(files) - _FILES_SHOWN} more" if len(files) > _FILES_SHOWN else ""
            content.append(
                {
                    "type": "text",
                    "text": f"\n\n[Files in skill {skill.name!r}, readable with read_skill_file: {shown}{more}]",
                }
            )
        return ToolResult(
            content=content,
            details={
                "name": skill.name,
                "location": skill.entry_file,
                "baseDir": skill.base_dir,
                "fingerprint": skill.fingerprint,
                "revision": skill.revision,
                "files": files[:_FILES_SHOWN],
                "changedSinceSync": changed,
            },
        )


class ReadSkillFileTool(Tool):
    name = "read_skill_file"
    changes = False
    label = "Read skill file"
    description = (
        "Read a file that a skill ships (a script, a reference, a template), by the skill's name and the "
        "file's path relative to the skill's folder. Paths outside the skill's folder are refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 255, "description": "The skill's name."},
            "path": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "description": "Path relative to the skill's folder, e.g. 'scripts/fix.sh'.",
            },
        },
        "required": ["name", "path"],
        "additionalProperties": False,
    }
    manifest = _MANIFEST

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        skill = _caller_skill(ctx, args["name"])
        path = args["path"]
        if not skill.is_folder:
            raise ToolError(f"Skill {skill.name!r} is a single file; it has no attached files to read.")
        limit = conf.file_read_limit()
        try:
            data = read_confined(skill.base_dir, path, max_bytes=limit)
        except ConfinementError as exc:
            raise ToolError(f"Refused to read {path!r} from skill {skill.name!r}: {exc}") from None
        details = {"name": skill.name, "path": path, "bytes": len(data)}
        mime = _image_type(data)
        if mime:
            return ToolResult(
                content=[
                    {"type": "text", "text": f"Read image file [{mime}]"},
                    {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime},
                ],
                details=details,
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"{path!r} in skill {skill.name!r} is a binary file ({len(data)} bytes); only text and images are returned."
            ) from None
        return ToolResult.text(text, details=details)


READ_SKILL = ReadSkillTool()
READ_SKILL_FILE = ReadSkillFileTool()


def register_skill_tools() -> None:
    """Add both tools to the catalog (idempotent)."""
    register_tool(READ_SKILL)
    register_tool(READ_SKILL_FILE)
