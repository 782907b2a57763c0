"""Finding skills on disk: roots, Pi's walking rules, validation, collisions.

Roots, highest precedence first (the first skill with a name wins):

* **project**: ``<cwd>/.neta/skills``; ``.agents/skills`` in ``<cwd>`` and in
  each ancestor up to the git root (the nearest folder holding ``.git``; the
  filesystem root when there is none), nearest first; ``<cwd>/.pi/skills``;
  the managed import folder ``<managed>/project``.
* **workspace**: every folder of ``settings.NETA_SKILLS_DIRS`` in order, then
  ``<managed>/workspace``.
* **user**: ``~/.neta/skills``, ``~/.agents/skills``, ``<managed>/user``.

Walking a root (Pi's rules): a folder holding a ``SKILL.md`` file is a skill
and is not descended further; otherwise its sub-folders are searched, in
byte-wise name order, skipping names starting with ``.`` and
``node_modules``; symlinks are followed (broken ones skipped, loops cut);
``.gitignore``/``.ignore``/``.fdignore`` rules of the root and its sub-folders
apply. Loose ``*.md`` files directly in a root are skills too, except in
``.agents/skills`` roots and managed roots. A file reached twice (through
symlinks or overlapping roots) is registered once, at its first location.

Nothing here touches the database; :func:`discover_skills` returns plain data
that ``services.skills_sync`` records.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from skills_registry.diagnostics import Diagnostic
from skills_registry.fingerprint import SkillContents, skill_contents
from skills_registry.frontmatter import ParsedSkill, parse_skill_text

SCOPES = ("project", "workspace", "user")
IGNORE_FILE_NAMES = (".gitignore", ".ignore", ".fdignore")
DEFAULT_MAX_ENTRY_BYTES = 1 << 20  # a SKILL.md larger than 1 MiB is refused
IMPORTS_DIR = ".imports"  # sidecar records of imported skills, inside a managed root


@dataclass(frozen=True, slots=True)
class SkillRoot:
    path: Path
    scope: str
    label: str  # where the root comes from, e.g. ".neta/skills" or "NETA_SKILLS_DIRS[0]"
    include_root_files: bool = True
    managed: bool = False
    required: bool = False  # a configured root: report it when missing

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "scope": self.scope, "label": self.label, "managed": self.managed}


def find_git_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project_roots(cwd: Path, managed_dir: Path | None = None) -> list[SkillRoot]:
    cwd = Path(os.path.abspath(cwd))
    roots = [SkillRoot(cwd / ".neta" / "skills", "project", ".neta/skills")]
    git_root = find_git_root(cwd)
    folder = cwd
    while True:
        label = ".agents/skills" if folder == cwd else f"{folder}/.agents/skills"
        roots.append(SkillRoot(folder / ".agents" / "skills", "project", label, include_root_files=False))
        if folder == git_root or folder.parent == folder:
            break
        folder = folder.parent
    roots.append(SkillRoot(cwd / ".pi" / "skills", "project", ".pi/skills"))
    if managed_dir is not None:
        roots.append(_managed_root(managed_dir, "project"))
    return roots


def _managed_root(managed_dir: Path, scope: str) -> SkillRoot:
    return SkillRoot(
        Path(os.path.abspath(managed_dir)) / scope,
        scope,
        f"managed/{scope}",
        include_root_files=False,
        managed=True,
    )


def default_roots(
    *,
    cwd: Path,
    home: Path,
    workspace_dirs: list[str] | tuple[str, ...] = (),
    managed_dir: Path | None = None,
    base_dir: Path | None = None,
) -> list[SkillRoot]:
    """All roots in precedence order (see the module docstring)."""
    roots = project_roots(cwd, managed_dir)
    for index, raw in enumerate(workspace_dirs):
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path(cwd)) / path
        roots.append(SkillRoot(Path(os.path.abspath(path)), "workspace", f"NETA_SKILLS_DIRS[{index}]", required=True))
    if managed_dir is not None:
        roots.append(_managed_root(managed_dir, "workspace"))
    home = Path(os.path.abspath(home))
    roots.append(SkillRoot(home / ".neta" / "skills", "user", "~/.neta/skills"))
    roots.append(SkillRoot(home / ".agents" / "skills", "user", "~/.agents/skills", include_root_files=False))
    if managed_dir is not None:
        roots.append(_managed_root(managed_dir, "user"))
    return roots


# --- walking ---------------------------------------------------------------------


class _IgnoreRules:
    """Pi's accumulating ignore matcher: each folder's rules, prefixed by its path."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._spec = pathspec.GitIgnoreSpec.from_lines([])

    def add_from(self, folder: str, rel_prefix: str) -> None:
        added = False
        for filename in IGNORE_FILE_NAMES:
            try:
                with open(os.path.join(folder, filename), encoding="utf-8", errors="replace") as fh:
                    content = fh.read(1 << 20)
            except OSError:
                continue
            for raw in content.replace("\r\n", "\n").split("\n"):
                line = self._prefixed(raw, rel_prefix)
                if line:
                    self._lines.append(line)
                    added = True
        if added:
            self._spec = pathspec.GitIgnoreSpec.from_lines(self._lines)

    @staticmethod
    def _prefixed(line: str, prefix: str) -> str | None:
        trimmed = line.strip()
        if not trimmed or (trimmed.startswith("#") and not trimmed.startswith("\\#")):
            return None
        pattern, negated = line, False
        if pattern.startswith("!"):
            negated, pattern = True, pattern[1:]
        elif pattern.startswith("\\!"):
            pattern = pattern[1:]
        if pattern.startswith("/"):
            pattern = pattern[1:]
        prefixed = f"{prefix}{pattern}"
        return f"!{prefixed}" if negated else prefixed

    def ignores(self, rel_path: str) -> bool:
        return bool(self._lines) and self._spec.match_file(rel_path)


def _kind(path: str, entry: os.DirEntry | None = None) -> str | None:
    """``"dir"``, ``"file"``, ``"other"`` following symlinks; ``None`` when broken."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "other"


def _sorted_entries(folder: str) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: os.fsencode(e.name))
    except OSError:
        return []


def walk_root(root: SkillRoot) -> list[tuple[Path, bool]]:
    """``(entry_file, is_folder_skill)`` for every candidate skill in ``root``, in Pi's order."""
    top = os.fspath(root.path)
    if _kind(top) != "dir":
        return []
    found: list[tuple[Path, bool]] = []
    rules = _IgnoreRules()

    def visit(folder: str, include_root_files: bool, ancestors: frozenset[str]) -> None:
        rel_folder = os.path.relpath(folder, top)
        prefix = "" if rel_folder == "." else rel_folder.replace(os.sep, "/") + "/"
        rules.add_from(folder, prefix)
        entries = _sorted_entries(folder)
        for entry in entries:
            if entry.name != "SKILL.md":
                continue
            full = os.path.join(folder, entry.name)
            if _kind(full) == "file" and not rules.ignores(prefix + entry.name):
                found.append((Path(full), True))
                return
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "node_modules":
                continue
            full = os.path.join(folder, entry.name)
            kind = _kind(full)
            if kind is None:
                continue  # broken symlink
            rel = prefix + entry.name
            if rules.ignores(rel + "/" if kind == "dir" else rel):
                continue
            if kind == "dir":
                try:
                    real = os.path.realpath(full)
                except OSError:
                    continue  # changed while we looked
                if real in ancestors:
                    continue  # a symlink loop
                visit(full, False, ancestors | {real})
                continue
            if kind == "file" and include_root_files and entry.name.endswith(".md"):
                found.append((Path(full), False))

    try:
        top_real = os.path.realpath(top)
    except OSError:
        return []
    visit(top, root.include_root_files, frozenset({top_real}))
    return found


# --- loading -------------------------------------------------------------------------


@dataclass(slots=True)
class DiscoveredSkill:
    name: str
    description: str
    scope: str
    root: SkillRoot
    entry_file: Path  # absolute, as reached from the root (Pi's filePath)
    base_dir: Path
    is_folder: bool
    parsed: ParsedSkill
    contents: SkillContents
    order: int
    status: str = "active"  # active / invalid / shadowed
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: str = "local"
    source_info: dict[str, Any] = field(default_factory=dict)

    @property
    def disable_model_invocation(self) -> bool:
        return self.parsed.disable_model_invocation

    @property
    def version(self) -> str:
        return self.parsed.version


@dataclass(slots=True)
class DiscoveryResult:
    skills: list[DiscoveredSkill]
    diagnostics: list[Diagnostic]  # not tied to one skill (missing roots)
    roots: list[SkillRoot]

    def all_diagnostics(self) -> list[Diagnostic]:
        out = list(self.diagnostics)
        for skill in self.skills:
            out.extend(skill.diagnostics)
        return out


def read_skill_text(path: Path, *, max_bytes: int) -> tuple[str | None, list[tuple[str, str]]]:
    """The file's text and problems as ``(code, message)``; ``None`` when unusable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return None, [("file-unreadable", f"cannot open: {exc.strerror or exc}")]
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, [("file-unreadable", "not a regular file")]
        if st.st_size > max_bytes:
            return None, [("file-too-large", f"the file has {st.st_size} bytes; the limit is {max_bytes}")]
        chunks = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        return None, [("file-unreadable", f"cannot read: {exc.strerror or exc}")]
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None, [("file-too-large", f"the file grew past the limit of {max_bytes} bytes")]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", "replace"), [("file-not-utf8", f"not valid UTF-8 at byte {exc.start}")]


def _import_record(root: SkillRoot, base_dir: Path) -> dict[str, Any] | None:
    if not root.managed or base_dir.parent != root.path:
        return None
    try:
        with open(root.path / IMPORTS_DIR / f"{base_dir.name}.json", encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load_skill_file(
    entry_file: Path, *, is_folder: bool, root: SkillRoot, mode: str, order: int, max_entry_bytes: int
) -> DiscoveredSkill:
    """Read, parse and validate one candidate; never raises for bad content."""
    base_dir = entry_file.parent
    path_text = os.fspath(entry_file)
    text, problems = read_skill_text(entry_file, max_bytes=max_entry_bytes)
    diags = [Diagnostic.make(code, message, path=path_text, mode=mode) for code, message in problems]
    if text is None:
        parsed = ParsedSkill(name=base_dir.name, description="")
    else:
        parsed = parse_skill_text(text, parent_dir_name=base_dir.name, path=path_text, mode=mode)
    diags.extend(parsed.diagnostics)
    parsed.diagnostics = diags
    contents = skill_contents(entry_file=entry_file, base_dir=base_dir, is_folder=is_folder)
    if contents.truncated:
        diags.append(
            Diagnostic.make(
                "too-many-files",
                f"only the first {len(contents.files)} files are fingerprinted and listed",
                path=path_text,
                mode=mode,
            )
        )
    source_info: dict[str, Any] = {
        "root": str(root.path),
        "root_label": root.label,
        "path": os.path.relpath(entry_file, root.path).replace(os.sep, "/"),
    }
    source = "local"
    record = _import_record(root, base_dir) if is_folder else None
    if record is not None:
        source = record.get("source") if record.get("source") in ("zip", "folder-import") else "local"
        source_info.update({k: v for k, v in record.items() if k != "source"})
    return DiscoveredSkill(
        name=parsed.name,
        description=parsed.description,
        scope=root.scope,
        root=root,
        entry_file=entry_file,
        base_dir=base_dir,
        is_folder=is_folder,
        parsed=parsed,
        contents=contents,
        order=order,
        status="active" if parsed.valid and not any(d.severity == "error" for d in diags) else "invalid",
        diagnostics=diags,
        source=source,
        source_info=source_info,
    )


def discover_skills(
    roots: list[SkillRoot], *, mode: str = "strict", max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
) -> DiscoveryResult:
    """Walk ``roots`` (precedence order), load every candidate, resolve name collisions."""
    skills: list[DiscoveredSkill] = []
    root_diags: list[Diagnostic] = []
    seen_real: set[str] = set()
    for root in roots:
        if root.required and _kind(os.fspath(root.path)) != "dir":
            root_diags.append(
                Diagnostic.make(
                    "root-missing",
                    f"skill root {root.label} = {root.path} does not exist or is not a folder",
                    path=str(root.path),
                    mode=mode,
                    pi_message="skill path does not exist",
                )
            )
            continue
        for entry_file, is_folder in walk_root(root):
            try:
                real = os.path.realpath(entry_file)
            except OSError:
                continue  # changed while we looked
            if real in seen_real:
                continue  # the same file through a symlink or an overlapping root
            seen_real.add(real)
            skills.append(
                load_skill_file(
                    entry_file,
                    is_folder=is_folder,
                    root=root,
                    mode=mode,
                    order=len(skills),
                    max_entry_bytes=max_entry_bytes,
                )
            )
    winners: dict[str, DiscoveredSkill] = {}
    for skill in skills:
        if skill.status == "invalid":
            continue
        winner = winners.get(skill.name)
        if winner is None:
            winners[skill.name] = skill
            continue
        skill.status = "shadowed"
        skill.diagnostics.append(
            Diagnostic.make(
                "collision",
                f'name "{skill.name}" is already taken by {winner.entry_file} ({winner.scope} scope)',
                path=os.fspath(skill.entry_file),
                mode=mode,
                pi_message=f'name "{skill.name}" collision',
                winner_path=os.fspath(winner.entry_file),
                loser_path=os.fspath(skill.entry_file),
            )
        )
    return DiscoveryResult(skills=skills, diagnostics=root_diags, roots=list(roots))
