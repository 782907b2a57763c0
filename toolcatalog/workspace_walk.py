"""Walking a workspace directory the way ``find``/``grep`` need it.

* Descends through directory *descriptors* opened with ``O_NOFOLLOW``: a
  symlink is listed as an entry but never entered, and a directory swapped for
  a symlink mid-walk is skipped instead of followed, so a walk never leaves the
  directory it started in.
* ``.git`` directories are skipped; hidden files are included (fd/rg
  ``--hidden``).
* ``.gitignore`` files are honoured at every level with git's rules (later and
  deeper patterns win, ``!`` re-includes, ``dir/`` patterns match directories),
  together with ``.git/info/exclude`` of a repository inside the workspace and
  the ``.gitignore`` files of the ancestors of the start directory up to its
  workspace root.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolcatalog.protocol import CancelSignal, ToolCancelled

if TYPE_CHECKING:
    import pathspec

MAX_IGNORE_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 64
ALWAYS_SKIPPED = frozenset({".git"})

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _read_small(name: str, dir_fd: int) -> str | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_IGNORE_FILE_BYTES:
            return None
        data = os.read(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class _Spec:
    base: tuple[str, ...]  # directory (relative to the walk's anchor) the patterns are relative to
    spec: pathspec.GitIgnoreSpec


class IgnoreRules:
    """A stack of gitignore specs; the deepest spec with a matching pattern decides."""

    def __init__(self, specs: tuple[_Spec, ...] = ()) -> None:
        self.specs = specs

    def with_directory(self, dir_fd: int, rel: tuple[str, ...]) -> IgnoreRules:
        import pathspec  # loaded on first use: the subagent child's start-up (spawn → run_start) stays light

        added = []
        text = _read_small(".gitignore", dir_fd)
        if text:
            added.append(_Spec(rel, pathspec.GitIgnoreSpec.from_lines(text.splitlines())))
        try:
            git_fd = os.open(".git", _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            git_fd = None
        if git_fd is not None:
            try:
                info_fd = os.open("info", _DIR_FLAGS, dir_fd=git_fd)
                try:
                    exclude = _read_small("exclude", info_fd)
                finally:
                    os.close(info_fd)
                if exclude:
                    added.insert(0, _Spec(rel, pathspec.GitIgnoreSpec.from_lines(exclude.splitlines())))
            except OSError:
                pass
            finally:
                os.close(git_fd)
        return IgnoreRules(self.specs + tuple(added)) if added else self

    def ignored(self, rel: tuple[str, ...], is_dir: bool) -> bool:
        for item in reversed(self.specs):
            if rel[: len(item.base)] != item.base or len(rel) <= len(item.base):
                continue
            sub = "/".join(rel[len(item.base) :]) + ("/" if is_dir else "")
            result = item.spec.check_file(sub)
            if result.include is not None:
                return bool(result.include)
        return False


@dataclass(frozen=True, slots=True)
class WalkEntry:
    rel: tuple[str, ...]  # relative to the start directory
    name: str
    kind: str  # "file" | "dir" | "symlink" | "other"
    dir_fd: int  # the containing directory, valid only while the walk is at this entry

    @property
    def path(self) -> str:
        return "/".join(self.rel)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def ancestor_rules(root: str, parts: tuple[str, ...]) -> IgnoreRules:
    """Ignore rules of the workspace ``root`` and of each directory on the way to ``parts``.

    Like all rules here, their bases are relative to the workspace root; the
    start directory's own rules are added by :func:`walk`.
    """
    specs: list[_Spec] = []
    fd = os.open(root, _DIR_FLAGS)
    try:
        for depth in range(len(parts)):
            specs.extend(IgnoreRules().with_directory(fd, tuple(parts[:depth])).specs)
            nxt = os.open(parts[depth], _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return IgnoreRules(tuple(specs))


def walk(
    start_fd: int,
    *,
    rules: IgnoreRules,
    prefix: tuple[str, ...] = (),
    cancel: CancelSignal | None = None,
    honour_ignore: bool = True,
    skip: frozenset[tuple[int, int]] = frozenset(),
) -> Iterator[WalkEntry]:
    """Depth-first, name-sorted walk below the directory ``start_fd`` (which stays open).

    ``prefix`` is the start directory relative to its workspace root (what the
    rules' bases are relative to); entries are named relative to the start.
    Entries whose ``(st_dev, st_ino)`` is in ``skip`` (protected paths) are
    neither listed nor entered.
    """

    def visit(fd: int, rel: tuple[str, ...], rules: IgnoreRules, depth: int) -> Iterator[WalkEntry]:
        if cancel is not None and cancel.is_set():
            raise ToolCancelled("cancelled while walking the workspace")
        if honour_ignore:
            rules = rules.with_directory(fd, prefix + rel)
        try:
            with os.scandir(fd) as it:
                stats = sorted((e.name, e.stat(follow_symlinks=False)) for e in it)
        except OSError:
            return
        entries = [(name, st.st_mode) for name, st in stats if (st.st_dev, st.st_ino) not in skip]
        for name, mode in entries:
            kind = _kind(mode)
            child_rel = rel + (name,)
            if kind == "dir" and name in ALWAYS_SKIPPED:
                continue
            if honour_ignore and rules.ignored(prefix + child_rel, kind == "dir"):
                continue
            yield WalkEntry(child_rel, name, kind, fd)
            if kind == "dir" and depth < MAX_DEPTH:
                try:
                    child_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished, or swapped for a symlink: do not follow
                try:
                    yield from visit(child_fd, child_rel, rules, depth + 1)
                finally:
                    os.close(child_fd)

    yield from visit(start_fd, (), rules, 0)
