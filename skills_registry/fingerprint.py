"""A skill's files and its content fingerprint.

The fingerprint is a SHA-256 over every file of the skill: for each entry, in
byte-wise order of its relative path, the path, its type and either the
SHA-256 of its bytes (regular file) or its link target (symlink). Symlinks are
recorded, never followed, so a link pointing elsewhere cannot make the
fingerprint read files outside the skill. ``.git`` folders are left out.

A folder skill's files are everything under its base dir; a loose ``.md``
skill (a file directly in a skills root) is just that file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# How many files a row lists (the fingerprint always covers all of them).
LISTED_FILES_LIMIT = 500
# Walking stops here; more files is reported as ``too-many-files``.
WALK_FILES_LIMIT = 20000
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class SkillFile:
    path: str  # relative, "/"-separated
    kind: str  # "file", "symlink", "other"
    size: int
    sha256: str = ""
    target: str = ""

    def to_dict(self) -> dict:
        out = {"path": self.path, "kind": self.kind, "size": self.size}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.target:
            out["target"] = self.target
        return out


@dataclass(frozen=True, slots=True)
class SkillContents:
    fingerprint: str
    files: tuple[SkillFile, ...]
    truncated: bool  # the walk hit WALK_FILES_LIMIT

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files if f.kind == "file")

    def listing(self) -> list[dict]:
        return [f.to_dict() for f in self.files[:LISTED_FILES_LIMIT]]


def _hash_file(path: str) -> str:
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _describe(full: str, rel: str) -> SkillFile:
    try:
        st = os.lstat(full)
    except OSError:
        return SkillFile(rel, "other", 0)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(full)
        except OSError:
            target = "?"
        return SkillFile(rel, "symlink", 0, target=target)
    if stat.S_ISREG(st.st_mode):
        try:
            return SkillFile(rel, "file", st.st_size, sha256=_hash_file(full))
        except OSError:
            return SkillFile(rel, "other", st.st_size)
    return SkillFile(rel, "other", 0)


def _walk(base: str) -> tuple[list[tuple[str, str]], bool]:
    """``(full, rel)`` for every non-directory under ``base``, not following links."""
    found: list[tuple[str, str]] = []
    stack = [("", base)]
    while stack:
        rel_dir, full_dir = stack.pop()
        try:
            with os.scandir(full_dir) as it:
                entries = sorted(it, key=lambda e: os.fsencode(e.name))
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}{entry.name}"
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if entry.name != ".git":
                    subdirs.append((rel + "/", entry.path))
                continue
            found.append((entry.path, rel))
            if len(found) >= WALK_FILES_LIMIT:
                return found, True
        stack.extend(reversed(subdirs))
    return found, False


def _digest(files: list[SkillFile]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(os.fsencode(f.path))
        digest.update(b"\0")
        digest.update(f.kind.encode())
        digest.update(b"\0")
        digest.update((f.sha256 or f.target).encode("utf-8", "surrogateescape"))
        digest.update(b"\n")
    return digest.hexdigest()


def skill_contents(*, entry_file: Path, base_dir: Path, is_folder: bool) -> SkillContents:
    """List and fingerprint a skill's files (see the module docstring)."""
    if not is_folder:
        item = _describe(os.fspath(entry_file), entry_file.name)
        return SkillContents(_digest([item]), (item,), False)
    try:
        base = os.path.realpath(base_dir)
    except OSError:
        base = os.path.abspath(base_dir)
    pairs, truncated = _walk(base)
    files = sorted((_describe(full, rel) for full, rel in pairs), key=lambda f: os.fsencode(f.path))
    return SkillContents(_digest(files), tuple(files), truncated)
