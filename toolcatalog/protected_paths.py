"""Files the tools never touch, whatever the workspace roots say, and the hard-link rule.

*Protected paths* are the server's own secrets and stores: the secret key and
admin password files under ``VAR_DIR``, every file named by a ``NETA_*_FILE``
variable, the SQLite database files (with their ``-wal``/``-shm``/``-journal``
companions), the sessions directory, and ``NETA_TOOL_DENY_PATHS``. The file
tools refuse a path that resolves to one of them or below one; walks (``find``,
``grep``) skip them; the bubblewrap sandbox masks those lying inside a bound
root (an empty file or directory over them). ``bash`` without bubblewrap can
still read them: only the sandbox keeps a command away from the server's files.

*Hard links*: a hard link is the same file under a second name, so a link made
inside a workspace to a file outside it (say, while the sandbox was ``none``)
would carry that file past every path check and into later sandboxed runs. The
file tools therefore refuse any regular file with more than one link
(:func:`refuse_hard_link`), and bash under bubblewrap refuses to start while a
root holds a file with a link outside the roots (:func:`outside_hard_links`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.lazy_settings import settings  # no Django at a subagent child's start-up
from infra.memo import recent
from toolcatalog.shared_types import ResolvedPaths, ToolError

VAR_SECRETS = ("secret_key", "admin-password")
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


class HardLinkRefused(ToolError):
    """A file with more than one link: it may be the same file as one outside the workspace."""


def protected_paths() -> tuple[Path, ...]:
    """The protected paths for this process's settings (real paths; they need not exist)."""
    try:
        if not settings.configured:
            return ResolvedPaths()
        var_dir = getattr(settings, "VAR_DIR", None)
        found: list[str] = [os.path.join(var_dir, name) for name in VAR_SECRETS] if var_dir else []
        for db in getattr(settings, "DATABASES", {}).values():
            if "sqlite" in str(db.get("ENGINE", "")) and str(db.get("NAME", "")) not in ("", ":memory:"):
                found += [f"{db['NAME']}{suffix}" for suffix in SQLITE_COMPANIONS]
        sessions_dir = getattr(settings, "NETA_SESSIONS_DIR", None)
        if sessions_dir:
            found.append(os.fspath(sessions_dir))
        found += [str(p) for p in getattr(settings, "NETA_TOOL_DENY_PATHS", []) or []]
        found += [str(p) for p in getattr(settings, "NETA_SECRET_FILES", []) or []]  # the NETA_*_FILE secrets
    except Exception:  # noqa: BLE001 - settings not importable (plain-Python use)
        return ResolvedPaths()
    return recent(_resolved, tuple(found), RESOLVED_SECONDS, lambda: _resolve(found), limit=16)


def _resolve(found: list[str]) -> ResolvedPaths:
    out: list[Path] = []
    for raw in found:
        real = Path(os.path.realpath(raw))
        if real not in out:
            out.append(real)
    return ResolvedPaths(out)


# Resolving every protected path (a few lstat calls each) for every tool context was
# ~2 % of a turn: the answer for the same settings is reused for a few seconds. A path
# moved in that window is found again at the next resolution (the server's own files
# do not move under it in normal operation; see the module docstring on what a tool
# without the sandbox can reach anyway).
_resolved: dict = {}
RESOLVED_SECONDS = 5.0


#: System folders an MCP server's read-only paths may not name (nor an ancestor of): the
#: machine's accounts and keys, the kernel's views, other services' data.
SYSTEM_PRIVATE = ("/etc", "/root", "/proc", "/sys", "/dev", "/boot", "/run", "/var/lib", "/var/log")


def var_dir() -> Path | None:
    """The state directory (``VAR_DIR``), resolved; ``None`` without settings."""
    try:
        value = getattr(settings, "VAR_DIR", None) if settings.configured else None
    except Exception:  # noqa: BLE001 - settings not importable (plain-Python use)
        return None
    return Path(os.path.realpath(value)) if value else None


def confined_protected() -> tuple[Path, ...]:
    """What a confined server process (an MCP server) must never see: the protected paths and
    the whole state directory (its database, sessions, workspaces, keys)."""
    found = list(protected_paths())
    var = var_dir()
    if var is not None and var not in found:
        found.append(var)
    return tuple(found)


def read_only_path_problem(path: str) -> str | None:
    """Why ``path`` may not be made visible to an MCP server (``None``: it may): ``/``, the
    state directory, a protected path, a private system folder, anything inside one of them,
    or a folder that holds one of them."""
    if not isinstance(path, str) or not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    real = os.path.realpath(path)
    if real == "/":
        return "'/' would show the whole machine"
    guarded = [(str(p), "a protected path") for p in confined_protected()]
    guarded += [(os.path.realpath(p), "a private system folder") for p in SYSTEM_PRIVATE]
    for other, what in guarded:
        if real == other or real.startswith(other.rstrip("/") + "/"):
            return f"{path!r} is {what} or inside one ({other})"
        if other.startswith(real.rstrip("/") + "/"):
            return f"{path!r} holds {what} ({other})"
    return None


#: System folders a workspace may not be in: what the machine runs and keeps.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", *SYSTEM_PRIVATE)


def _installation_dirs() -> list[tuple[str, str]]:
    """The server's code and interpreter, with what each is."""
    found = [(os.path.realpath(sys.prefix), "the server's Python installation"), (os.path.realpath(sys.base_prefix), "the server's Python installation")]
    try:
        if settings.configured and getattr(settings, "BASE_DIR", None):
            found.append((os.path.realpath(settings.BASE_DIR), "the server's code"))
    except Exception:  # noqa: BLE001 - settings not importable (plain-Python use)
        pass
    return found


_guards: dict = {}


def _workspace_guards() -> tuple[Path | None, tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The state directory, the installation's folders and the system folders, resolved: what
    every workspace check (each turn's) compares with, reused for a few seconds as the
    protected paths are (~25 resolutions, a few lstat calls each)."""
    try:
        key = (getattr(settings, "VAR_DIR", None), getattr(settings, "BASE_DIR", None)) if settings.configured else None
    except Exception:  # noqa: BLE001 - settings not importable (plain-Python use)
        key = None
    return recent(
        _guards, key, RESOLVED_SECONDS,
        lambda: (var_dir(), tuple(_installation_dirs()), tuple(os.path.realpath(system) for system in SYSTEM_DIRS)),
        limit=4,
    )  # fmt: skip


def workspace_path_problem(path: str) -> str | None:
    """Why an agent's working directory or workspace root may not be ``path`` (``None``: it may):
    tools write there, so it may not hold the state directory, the server's code or its Python,
    nor be a system folder or lie in one (protected paths inside a workspace are masked and
    refused anyway). The state directory's own workspace folders (``var/workspace``) are fine:
    a workspace may lie inside the state directory, it may not contain it."""
    if not isinstance(path, str) or not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    real = os.path.realpath(path)
    if real == "/":
        return "'/' is the whole machine"
    var, installation, systems = _workspace_guards()
    held = ([(str(var), "the state directory")] if var is not None else []) + list(installation)
    for other, what in held:
        if other.startswith(real.rstrip("/") + "/") or other == real:
            return f"{path!r} holds {what} ({other})"
    for other, what in installation:
        inside = real.startswith(other.rstrip("/") + "/")
        if inside and not (var is not None and (real == str(var) or real.startswith(str(var) + "/"))):
            return f"{path!r} lies in {what} ({other})"
    for system in systems:
        if real == system or real.startswith(system.rstrip("/") + "/"):
            if var is not None and (real == str(var) or real.startswith(str(var) + "/")):
                break  # a state directory under /var (/var/lib/neta) keeps its workspaces there
            return f"{path!r} is a system folder or lies in one ({system})"
    return None


def protected_match(real: str, protected: Sequence[Path]) -> Path | None:
    """The protected path that ``real`` (a resolved path) is or lies under, if any."""
    for p in protected:
        ps = str(p)
        if real == ps or real.startswith(ps.rstrip("/") + "/"):
            return p
    return None


def protected_identities(protected: Iterable[Path]) -> frozenset[tuple[int, int]]:
    """``(st_dev, st_ino)`` of the protected paths that exist (walks skip these)."""
    ids = set()
    for p in protected:
        try:
            st = os.stat(p)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return frozenset(ids)


def refuse_hard_link(st: os.stat_result, shown: str, *, verb: str) -> None:
    """Raise :class:`HardLinkRefused` for a regular file with more than one link."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise HardLinkRefused(
            f"Refused: {shown} has {st.st_nlink} hard links. A hard-linked file may be the same file as one "
            f"outside the workspace, so the file tools do not {verb} it. Remove the other links "
            "(or ask an operator to) and try again."
        )


@dataclass(frozen=True, slots=True)
class LinkScan:
    """What :func:`outside_hard_links` found: offending paths (a few), entries and directories read."""

    offenders: tuple[str, ...]
    visited: int
    rescanned: int = 0


@dataclass(frozen=True, slots=True)
class _DirRecord:
    path: str
    ctime_ns: int
    subdirs: tuple[str, ...]
    linked: tuple[tuple[int, int, int, str], ...]  # (dev, ino, nlink, path) of files with nlink > 1
    entries: int


# Directory (dev, ino) → what it held at ctime_ns. Adding, removing or renaming an
# entry changes a directory's ctime (and utime() cannot set ctime back), so an
# unchanged ctime means the same names: the directory need not be read again.
_DIR_CACHE: dict[tuple[int, int], _DirRecord] = {}
MAX_CACHED_DIRS = 200_000


def _read_dir(path: str, st: os.stat_result) -> _DirRecord:
    subdirs, linked, entries = [], [], 0
    try:
        with os.scandir(path) as it:
            for entry in it:
                entries += 1
                try:
                    est = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(est.st_mode):
                    if est.st_dev == st.st_dev:  # other file systems are not entered
                        subdirs.append(entry.name)
                elif stat.S_ISREG(est.st_mode) and est.st_nlink > 1:
                    linked.append((est.st_dev, est.st_ino, est.st_nlink, entry.path))
    except OSError:
        pass
    return _DirRecord(path, st.st_ctime_ns, tuple(subdirs), tuple(linked), entries)


def outside_hard_links(roots: Sequence[Path], *, show: int = 5) -> LinkScan:
    """Regular files under ``roots`` with more links than the roots themselves hold.

    Every regular file with ``st_nlink > 1`` is counted per inode; when fewer of
    its links are inside the roots than ``st_nlink``, at least one name is
    outside them, and the file is an offender. Symlinks are not followed and
    other file systems (mount points below a root) are not entered. Each
    directory is stat'ed on every call but read again only when its ctime
    changed (``_DIR_CACHE``), so a large unchanged workspace costs one
    ``stat`` per directory.
    """
    if len(_DIR_CACHE) > MAX_CACHED_DIRS:
        _DIR_CACHE.clear()
    seen: dict[tuple[int, int], list] = {}  # identity → [links found, st_nlink, first path]
    dirs: set[tuple[int, int]] = set()  # overlapping roots are walked once
    visited = rescanned = 0
    for root in roots:
        try:
            root_dev = os.stat(root).st_dev
        except OSError:
            continue
        stack = [os.fspath(root)]
        first = True
        while stack:
            path = stack.pop()
            try:
                st = os.stat(path) if first else os.lstat(path)
            except OSError:
                continue
            first = False
            key = (st.st_dev, st.st_ino)
            if not stat.S_ISDIR(st.st_mode) or st.st_dev != root_dev or key in dirs:
                continue
            dirs.add(key)
            record = _DIR_CACHE.get(key)
            if record is None or record.ctime_ns != st.st_ctime_ns or record.path != path:
                record = _read_dir(path, st)  # ctime taken before reading: a change meanwhile shows next time
                _DIR_CACHE[key] = record
                rescanned += 1
            visited += record.entries
            stack.extend(os.path.join(path, name) for name in record.subdirs)
            for dev, ino, nlink, file_path in record.linked:
                found = seen.setdefault((dev, ino), [0, nlink, file_path])
                found[0] += 1
    offenders = sorted(path for found, nlink, path in seen.values() if found < nlink)
    return LinkScan(
        offenders=tuple(offenders[:show]) + (("…",) if len(offenders) > show else ()),
        visited=visited,
        rescanned=rescanned,
    )
