"""Reading a file confined to a skill's folder, race-free.

``read_confined(base_dir, "scripts/fix.sh", max_bytes=...)``:

1. the path is checked as text: relative, ``/``-separated, no ``..``
   segment, no NUL or backslash;
2. it is resolved (symlinks inside the skill are fine) and must stay inside
   the skill folder's real path;
3. the resolved path is then opened component by component from a
   descriptor of the skill folder with ``O_NOFOLLOW``, so a symlink swapped in
   between steps 2 and 3 makes the open fail instead of leading out;
4. only a regular file is read (checked before and after opening; FIFOs and
   devices are never opened for reading), and only up to ``max_bytes``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class ConfinementError(Exception):
    """The path is refused; the message says why."""


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def check_relative(path: str) -> list[str]:
    """The path's segments, or :class:`ConfinementError` when it is not a plain relative path."""
    if not isinstance(path, str) or path == "":
        raise ConfinementError("the path is empty")
    if "\x00" in path:
        raise ConfinementError("the path contains a NUL character")
    if "\\" in path:
        raise ConfinementError("the path contains a backslash; use '/' between folders")
    if path.startswith("/") or os.path.isabs(path):
        raise ConfinementError(f"absolute paths are refused ({path!r}); give a path relative to the skill folder")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ConfinementError(f"'..' segments are refused ({path!r})")
    if not parts:
        raise ConfinementError(f"{path!r} names the skill folder itself, not a file")
    return parts


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def resolve_confined(base_dir: Path | str, path: str) -> tuple[str, list[str]]:
    """``(real base, real segments below it)`` for ``path``; refuses escapes."""
    parts = check_relative(path)
    try:
        base_real = os.path.realpath(base_dir)
        target_real = os.path.realpath(os.path.join(base_real, *parts))
    except OSError as exc:  # a link changed while it was being resolved
        raise ConfinementError(f"{path!r} changed while it was being resolved: {exc.strerror}") from None
    if target_real == base_real:
        raise ConfinementError(f"{path!r} names the skill folder itself, not a file")
    if not _inside(target_real, base_real):
        raise ConfinementError(f"{path!r} leads outside the skill folder (through a symlink)")
    return base_real, os.path.relpath(target_real, base_real).split(os.sep)


def open_confined(base_real: str, segments: list[str]) -> int:
    """Open ``segments`` below ``base_real`` without following any symlink; returns a fd."""
    try:
        dir_fd = os.open(base_real, _DIR_FLAGS)
    except OSError as exc:
        raise ConfinementError(f"the skill folder cannot be opened: {exc.strerror}") from None
    try:
        for segment in segments[:-1]:
            try:
                next_fd = os.open(segment, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ConfinementError("the path changed while it was being opened (a symlink appeared)") from None
                raise ConfinementError(f"cannot open {segment!r}: {exc.strerror}") from None
            os.close(dir_fd)
            dir_fd = next_fd
        last = segments[-1]
        try:
            st = os.stat(last, dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            raise ConfinementError(f"no such file in the skill folder: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise ConfinementError("the path changed while it was being opened (a symlink appeared)")
        if not stat.S_ISREG(st.st_mode):
            raise ConfinementError("not a regular file (folders, FIFOs, sockets and devices are refused)")
        try:
            fd = os.open(last, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfinementError("the path changed while it was being opened (a symlink appeared)") from None
            raise ConfinementError(f"cannot open the file: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ConfinementError("not a regular file (it changed while it was being opened)")
    return fd


def read_confined(base_dir: Path | str, path: str, *, max_bytes: int) -> bytes:
    """The bytes of ``path`` inside ``base_dir`` (see the module docstring)."""
    base_real, segments = resolve_confined(base_dir, path)
    fd = open_confined(base_real, segments)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ConfinementError(f"the file has {size} bytes; the limit is {max_bytes}")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ConfinementError(f"the file grew past the limit of {max_bytes} bytes while it was read")
    return data
