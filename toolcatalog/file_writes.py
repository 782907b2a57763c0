"""Writing a workspace file atomically, through directory descriptors.

The new content goes to a temporary file in the target's directory, is flushed
to disk, gets the old file's mode (and owner, when permitted), and is renamed
over the target. A crash or a bad call leaves either the old file or the new
one, never half of each. The directory is reached with ``O_NOFOLLOW`` from the
workspace root (see :mod:`toolcatalog.paths`), so a symlink swapped in during
the call makes it fail instead of writing elsewhere.
"""

from __future__ import annotations

import os
import stat
import uuid

from toolcatalog.paths import PathRefused, WorkspacePath
from toolcatalog.protected_paths import refuse_hard_link
from toolcatalog.protocol import ToolError


def find_lone_surrogate(text: str) -> int | None:
    for index, ch in enumerate(text):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return index
    return None


def encode_text(text: str, *, field: str) -> bytes:
    """UTF-8 bytes of ``text``; a lone surrogate is an error that names its position."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        index = find_lone_surrogate(text)
        raise ToolError(
            f"{field} contains a lone surrogate (U+{ord(text[index]):04X}) at character {index}; "
            "it is not valid Unicode and was not written"
        ) from None


def write_atomically(
    wp: WorkspacePath, data: bytes, *, create_parents: bool = True, expect: os.stat_result | None = None
) -> bool:
    """Replace (or create) the file at ``wp`` with ``data``; returns whether it existed.

    With ``expect`` (the stat of the file as it was read), a file that was
    replaced or modified in between is an error instead of a lost update.
    """
    if not wp.parts:
        raise PathRefused(f"{wp.shown!r} is a workspace root, not a file")
    try:
        parent = wp.open_parent(create=create_parents)
    except FileNotFoundError:
        raise ToolError(f"Directory of {wp.shown} does not exist") from None
    name = wp.parts[-1]
    tmp = f".{name[:200]}.neta-{uuid.uuid4().hex[:12]}.tmp"
    try:
        try:
            old = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None:
            if stat.S_ISDIR(old.st_mode):
                raise ToolError(f"{wp.shown} is a directory")
            if stat.S_ISLNK(old.st_mode):
                raise PathRefused(f"Path refused: {wp.shown!r} became a symlink during the call")
            if not stat.S_ISREG(old.st_mode):
                raise PathRefused(f"{wp.shown} is not a regular file; refusing to overwrite it")
            refuse_hard_link(old, wp.shown, verb="write")
        if expect is not None and (
            old is None
            or (old.st_dev, old.st_ino, old.st_size, old.st_mtime_ns)
            != (expect.st_dev, expect.st_ino, expect.st_size, expect.st_mtime_ns)
        ):
            raise ToolError(f"{wp.shown} changed while it was being edited; nothing was written, read it again")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb", closefd=False) as fh:
                fh.write(data)
                fh.flush()
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                try:
                    os.fchown(fd, old.st_uid, old.st_gid)
                except OSError:
                    pass
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        tmp = ""
        return old is not None
    except OSError as exc:
        if exc.errno == 27:  # EFBIG
            raise ToolError(f"{wp.shown}: file too large") from None
        raise ToolError(f"Could not write {wp.shown}: {exc.strerror or exc}") from None
    finally:
        if tmp:
            try:
                os.unlink(tmp, dir_fd=parent)
            except OSError:
                pass
        os.close(parent)
