"""``edit``: exact-text replacements in one file, each matching exactly once.

Pi's current argument shape is ``{path, edits: [{oldText, newText}, …]}``; the
older ``{path, oldText, newText}`` is accepted too. Every ``oldText`` is
matched against the *original* file (not incrementally), must occur exactly
once, and must not overlap another edit. Line endings are compared as LF and
restored afterwards; a UTF-8 BOM is kept. Either all edits apply or none.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any

from toolcatalog.builtins.read import open_regular_file
from toolcatalog.file_kinds import looks_binary
from toolcatalog.file_writes import encode_text, write_atomically
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import resolve_path
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult

MAX_EDIT_FILE_BYTES = 16 * 1024 * 1024


def read_text_file(ctx: ToolContext, raw_path: Any, *, verb: str, max_bytes: int) -> tuple[str, os.stat_result, str]:
    """A regular file's UTF-8 text in the workspace, its stat and shown path. Raises ToolError
    (refused path, too large, binary, not UTF-8) naming ``verb``."""
    fd, st, shown = open_regular_file(ctx, raw_path, verb=verb)
    with os.fdopen(fd, "rb", closefd=True) as fh:
        if st.st_size > max_bytes:
            raise ToolError(f"{shown} is larger than {max_bytes // (1024 * 1024)} MB; {verb} refuses it")
        raw = fh.read(max_bytes + 1)
    if looks_binary(raw[:8192]):
        raise ToolError(f"{shown} is a binary file; {verb} works on text files only")
    try:
        return raw.decode("utf-8"), st, shown
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not valid UTF-8 (byte {exc.start}); {verb} would corrupt it, so it refuses") from None


@dataclass(frozen=True)
class _Plan:
    st: os.stat_result  # the file as read: the write refuses a file changed since
    shown: str
    content: str  # LF line endings, no BOM
    updated: str
    final: str  # what is written: the BOM and line endings restored


def _line_ending(text: str) -> str:
    for i, ch in enumerate(text):
        if ch == "\n":
            return "\n"
        if ch == "\r":
            return "\r\n" if text[i + 1 : i + 2] == "\n" else "\n"
    return "\n"


def _to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _count(haystack: str, needle: str) -> int:
    count = 0
    index = haystack.find(needle)
    while index >= 0:
        count += 1
        index = haystack.find(needle, index + len(needle))
    return count


def unified_diff(old: str, new: str, name: str) -> tuple[str, int | None]:
    old_lines = old.split("\n")
    new_lines = new.split("\n")
    diff = list(difflib.unified_diff(old_lines, new_lines, f"a/{name}", f"b/{name}", n=3, lineterm=""))
    first = None
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, _i1, _i2, j1, _j2 in matcher.get_opcodes():
        if tag != "equal":
            first = j1 + 1
            break
    return "\n".join(diff), first


class EditTool(Tool):
    name = "edit"
    label = "edit"
    description = (
        "Edit a file by replacing exact text. Each edits[].oldText must match exactly (including whitespace) "
        "and occur exactly once in the original file; edits must not overlap. Use this for precise, surgical edits."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": (
                    "One or more targeted replacements. Each edit is matched against the original file, "
                    "not incrementally. Do not include overlapping or nested edits."
                ),
                "items": {
                    "type": "object",
                    "properties": {
                        "oldText": {
                            "type": "string",
                            "minLength": 1,
                            "description": "Exact text for one targeted replacement; must be unique in the file",
                        },
                        "newText": {"type": "string", "description": "Replacement text for this edit"},
                    },
                    "required": ["oldText", "newText"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process", requires_write=True)

    def prepare_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        if "edits" not in args and "oldText" in args and "newText" in args:
            args = dict(args)
            args["edits"] = [{"oldText": args.pop("oldText"), "newText": args.pop("newText")}]
        return args

    def _plan(self, ctx: ToolContext, args: dict[str, Any]) -> _Plan:
        """Read the file and apply the edits in memory (nothing written). Raises ToolError."""
        edits = args["edits"]
        for index, item in enumerate(edits):
            encode_text(item["oldText"], field=f"edits[{index}].oldText")
            encode_text(item["newText"], field=f"edits[{index}].newText")
        text, st, shown = read_text_file(ctx, args["path"], verb="edit", max_bytes=MAX_EDIT_FILE_BYTES)
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        body = text[len(bom):]
        ending = _line_ending(body)
        content = _to_lf(body)

        spans: list[tuple[int, int, int, str]] = []
        for index, item in enumerate(edits):
            old = _to_lf(item["oldText"])
            occurrences = _count(content, old)
            if occurrences == 0:
                raise ToolError(
                    f"Could not find edits[{index}].oldText in {shown}. The old text must match exactly "
                    "including all whitespace and newlines."
                )
            if occurrences > 1:
                raise ToolError(
                    f"Found {occurrences} occurrences of edits[{index}].oldText in {shown}. Each oldText must be "
                    "unique; add more surrounding context to make it unique."
                )
            start = content.find(old)
            spans.append((start, start + len(old), index, _to_lf(item["newText"])))
        spans.sort()
        for (s1, e1, i1, _), (s2, _e2, i2, _) in zip(spans, spans[1:]):
            if s2 < e1:
                raise ToolError(f"edits[{i1}] and edits[{i2}] overlap in {shown}; merge them into one edit")
        pieces = []
        cursor = 0
        for start, end, _index, new in spans:
            pieces.append(content[cursor:start])
            pieces.append(new)
            cursor = end
        pieces.append(content[cursor:])
        updated = "".join(pieces)
        if updated == content:
            raise ToolError(f"No changes made to {shown}: the replacements produce identical content")
        return _Plan(st=st, shown=shown, content=content, updated=updated, final=bom + (updated.replace("\n", "\r\n") if ending == "\r\n" else updated))

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        plan = self._plan(ctx, args)
        ctx.check_cancelled()
        wp = resolve_path(ctx, args["path"])  # again: the file may have moved since it was read
        write_atomically(wp, plan.final.encode("utf-8"), create_parents=False, expect=plan.st)
        edits = args["edits"]
        diff, first_changed = unified_diff(plan.content, plan.updated, plan.shown)
        count = len(edits)
        return ToolResult.text(
            f"Successfully replaced {count} block{'s' if count != 1 else ''} in {plan.shown}.",
            details={"diff": diff, "firstChangedLine": first_changed},
        )

    def approval_preview(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        """What the edit would change in the file as it is now, as a unified diff."""
        plan = self._plan(ctx, args)  # prepared and checked against the schema by the caller
        diff, first_changed = unified_diff(plan.content, plan.updated, plan.shown)
        return {"diff": diff, "firstChangedLine": first_changed}
