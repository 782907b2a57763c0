"""Workspace confinement for the file tools.

A path given by the model is checked lexically (NUL, control characters, lone
surrogates, ``~``, encoded traversal, over-long names) and then resolved the way
the kernel would: relative to the context's cwd, every symlink followed, with a
hop limit that turns loops into errors. The resolved path must lie inside one of
the context's workspace roots (their real paths) and not be a protected path (the
server's secrets and stores, :mod:`toolcatalog.protected_paths`), or the call
fails with a :class:`PathRefused` that says why. Regular files with more than
one hard link are refused by the file tools when they open them.

Resolution happens before the file is opened, so a concurrent process could swap
a checked directory for a symlink in between. The open helpers therefore walk
the *resolved* path again from the root's directory descriptor, one component at
a time, with ``O_NOFOLLOW``: a component that has become a symlink makes the
call fail instead of escaping.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from toolcatalog.protected_paths import protected_match
from toolcatalog.protocol import ToolContext, ToolError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINK_HOPS = 40

_HOME_USER = re.compile(r"~[a-z_][a-z0-9_.-]*(/|$)")
_O_PATH_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(ToolError):
    """The path is unusable or lies outside the workspace; nothing was touched."""


@dataclass(frozen=True, slots=True)
class WorkspacePath:
    """A path resolved inside a workspace root.

    ``real`` has no symlinks left (the missing tail, if any, is lexical);
    ``root`` is the root that contains it; ``parts`` are the components below
    ``root``; ``shown`` is what messages use (the path as the model wrote it).
    """

    real: Path
    root: Path
    parts: tuple[str, ...]
    shown: str

    @property
    def exists(self) -> bool:
        return os.path.lexists(self.real)

    @property
    def relative(self) -> str:
        return "/".join(self.parts) or "."

    def lstat(self) -> os.stat_result:
        return os.lstat(self.real)

    # --- descriptor-based access (defeats symlink swaps) -------------------------

    def _walk_dirs(self, parts: tuple[str, ...], *, create: bool) -> int:
        fd = os.open(self.root, _O_PATH_DIR)
        try:
            for name in parts:
                try:
                    nxt = os.open(name, _O_PATH_DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nxt = os.open(name, _O_PATH_DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
            return fd
        except OSError as exc:
            os.close(fd)
            raise _swap_or(exc, self.shown) from None

    def open_parent(self, *, create: bool = False) -> int:
        """A descriptor of the parent directory, walked without following symlinks."""
        if not self.parts:
            raise PathRefused(f"{self.shown!r} is a workspace root, not a file inside it")
        return self._walk_dirs(self.parts[:-1], create=create)

    def open_dir(self) -> int:
        return self._walk_dirs(self.parts, create=False)

    def open_file(self, flags: int, mode: int = 0o666) -> int:
        """Open the final component relative to its parent with ``O_NOFOLLOW``."""
        parent = self.open_parent(create=bool(flags & os.O_CREAT))
        try:
            return os.open(self.parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        except OSError as exc:
            raise _swap_or(exc, self.shown) from None
        finally:
            os.close(parent)


def _swap_or(exc: OSError, shown: str) -> OSError | PathRefused:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and isinstance(exc, OSError):
        return PathRefused(
            f"Path refused: {shown!r} changed while it was being used (a directory or file became a symlink)"
        )
    return exc


def _has_control(text: str) -> str | None:
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            return f"\\x{code:02x}"
    return None


# Overlong UTF-8 encodings of '.', '/' and '\\' that lenient decoders accept.
_OVERLONG = ("%c0%ae", "%e0%80%ae", "%c0%af", "%e0%80%af", "%c1%9c", "%c0%2e", "%c1%1c")


def _decoded_forms(name: str) -> set[str]:
    forms = {name}
    current = name
    for _ in range(3):  # %252e%252e → %2e%2e → ..
        decoded = unquote(current)
        if decoded == current:
            break
        forms.add(decoded)
        current = decoded
    forms |= {unicodedata.normalize("NFKC", f) for f in list(forms)}
    return forms


def check_path_text(raw: object, *, field: str = "path") -> str:
    """Lexical checks; returns the text or raises :class:`PathRefused`."""
    if not isinstance(raw, str):
        raise PathRefused(f"{field} must be a string")
    if raw == "" or raw.strip() == "":
        raise PathRefused(f"{field} is empty")
    try:
        encoded = raw.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused(f"Path refused: {field} is not valid Unicode (contains a lone surrogate)") from None
    if "\x00" in raw:
        raise PathRefused(f"Path refused: {field} contains a NUL byte")
    bad = _has_control(raw)
    if bad:
        raise PathRefused(f"Path refused: {field} contains the control character {bad}")
    if len(encoded) > MAX_PATH_BYTES:
        raise PathRefused(f"Path refused: {field} is {len(encoded)} bytes long (limit {MAX_PATH_BYTES})")
    if raw == "~" or raw.startswith("~/") or _HOME_USER.match(raw):
        raise PathRefused(
            f"Path refused: {raw!r} — home-relative paths (~) are not supported; use a path inside the workspace"
        )
    for segment in raw.split("/"):
        if len(segment.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathRefused(
                f"Path refused: a name in {field} is {len(segment.encode('utf-8'))} bytes long (limit {MAX_NAME_BYTES})"
            )
        if segment in ("", ".", ".."):
            continue
        lowered = segment.lower()
        if any(code in lowered for code in _OVERLONG):
            raise PathRefused(f"Path refused: {raw!r} contains an overlong-encoded dot or slash ({segment!r})")
        for form in _decoded_forms(segment):
            pieces = form.replace("\\", "/").split("/")
            if form != segment and "\x00" in form:
                raise PathRefused(f"Path refused: {raw!r} contains an encoded NUL byte ({segment!r})")
            if form != segment and (form in (".", "..") or any(p == ".." for p in pieces)):
                raise PathRefused(
                    f"Path refused: {raw!r} contains an encoded or look-alike path traversal ({segment!r})"
                )
            if form == segment and "\\" in segment and any(p == ".." for p in pieces):
                raise PathRefused(f"Path refused: {raw!r} contains a backslash path traversal ({segment!r})")
    return raw


def _resolve(path: str) -> str:
    """Resolve an absolute path like the kernel: follow symlinks, allow a missing tail."""
    pending = deque(path.split("/"))
    resolved = "/"
    hops = 0
    missing = False
    while pending:
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved) or "/"
            if missing and os.path.lexists(resolved):
                missing = False  # back on existing ground: resolve symlinks again
            continue
        candidate = os.path.join(resolved, name)
        if missing:
            resolved = candidate
            continue
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            missing = True
            resolved = candidate
            continue
        except NotADirectoryError:
            raise PathRefused(f"Path refused: {os.path.basename(resolved)!r} is not a directory") from None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise PathRefused("Path refused: a name is too long") from None
            raise
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise PathRefused("Path refused: too many levels of symbolic links (a symlink loop?)")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = "/"
            pending.extendleft(reversed(target.split("/")))
            continue
        if pending and not stat.S_ISDIR(st.st_mode) and any(p not in ("", ".") for p in pending):
            raise PathRefused(f"Path refused: {name!r} is not a directory")
        resolved = candidate
    return resolved


def resolve_path(ctx: ToolContext, raw: object, *, field: str = "path") -> WorkspacePath:
    """Resolve ``raw`` for ``ctx`` or raise :class:`PathRefused`. Does not require existence."""
    text = check_path_text(raw, field=field)
    joined = text if text.startswith("/") else os.path.join(str(ctx.cwd), text)
    real = _resolve(joined)
    for root in ctx.roots:
        root_s = str(root)
        if real == root_s or real.startswith(root_s.rstrip("/") + "/"):
            rel = real[len(root_s):].strip("/")
            parts = tuple(p for p in rel.split("/") if p)
            hit = protected_match(real, ctx.protected)
            if hit is not None:
                raise PathRefused(
                    f"Path refused: {text!r} is a protected server file or directory ({hit.name}); "
                    "tools never read or write it"
                )
            wp = WorkspacePath(real=Path(real), root=root, parts=parts, shown=text)
            if text.endswith("/") and wp.exists and not os.path.isdir(real):
                raise PathRefused(f"Path refused: {text!r} ends with '/' but is not a directory")
            return wp
    roots = ", ".join(str(r) for r in ctx.roots)
    raise PathRefused(f"Path refused: {text!r} resolves outside the workspace roots ({roots})")
