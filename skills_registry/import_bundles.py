"""Reading a ZIP archive or a local folder into a checked, in-memory skill bundle.

Nothing here writes to disk. A bundle is built in two phases:

1. **Inspect** everything that can be known without unpacking: for a ZIP,
   the central directory (entry count, names, types, declared sizes,
   compression ratios, encryption, methods, overlapping entries); for a
   folder, an ``lstat`` walk (no symlink is followed).
2. **Read** every file into memory, never more than the declared size and
   never more than the total limit, with the ZIP's CRC checked.

Any problem raises :class:`SkillImportError` with a message that names the
entry and the rule; the caller (``services``) writes the managed folder only
from a bundle that passed both phases and validation.

Refused in archives: absolute names (``/x``, ``C:\\x``, ``\\\\server``),
``..`` segments, backslashes, empty/``.`` segments, NUL and other control
characters, over-long or too deep names, duplicate names, a name used both as
a file and as a folder, symlinks, devices, FIFOs and sockets, encrypted
entries, compression methods other than stored/deflate, more than
``max_files`` entries, more than ``max_total_bytes`` unpacked, a compression
ratio above ``max_ratio`` (for entries above ``ratio_floor``), overlapping
entries, sizes that lie and CRC mismatches.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from skills_registry.conf import ImportLimits

ENTRY_FILE = "SKILL.md"
IGNORED_PREFIXES = ("__MACOSX/",)  # macOS resource forks: dropped, never written
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_SUPPORTED_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_TYPE_NAMES = {
    stat.S_IFLNK: "a symlink",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


class SkillImportError(Exception):
    """An import is refused; nothing was written."""


@dataclass(slots=True)
class SkillBundle:
    """A skill ready to be written: its folder name (may be empty) and its files."""

    folder_name: str  # "" when SKILL.md sits at the top of the archive
    files: dict[str, bytes]  # path relative to the skill folder -> content
    dirs: set[str] = field(default_factory=set)
    source: str = "zip"  # "zip" or "folder-import"
    original_name: str = ""
    sha256: str = ""  # of the archive, for ZIP imports

    @property
    def entry_text(self) -> str:
        return self.files[ENTRY_FILE].decode("utf-8", "replace")

    @property
    def total_bytes(self) -> int:
        return sum(len(v) for v in self.files.values())


def _fmt_bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def check_member_name(raw: str, *, limits: ImportLimits) -> tuple[list[str], bool]:
    """``(segments, is_dir)`` for an archive member name, or :class:`SkillImportError`."""
    shown = repr(raw)
    if raw == "":
        raise SkillImportError("an entry has an empty name")
    if "\x00" in raw:
        raise SkillImportError(f"entry {shown} contains a NUL character")
    if _CONTROL.search(raw):
        raise SkillImportError(f"entry {shown} contains a control character")
    if "\\" in raw:
        raise SkillImportError(f"entry {shown} contains a backslash (a Windows path separator); refused")
    if raw.startswith("/") or _DRIVE.match(raw):
        raise SkillImportError(f"entry {shown} is an absolute path; refused")
    if len(raw.encode("utf-8", "surrogateescape")) > limits.max_path_length:
        raise SkillImportError(f"entry {shown[:80]}... has a name longer than {limits.max_path_length} bytes")
    is_dir = raw.endswith("/")
    body = raw[:-1] if is_dir else raw
    segments = body.split("/")
    if ".." in segments:
        raise SkillImportError(f"entry {shown} contains a '..' segment (path traversal); refused")
    for segment in segments:
        if segment in ("", "."):
            raise SkillImportError(f"entry {shown} has an empty or '.' path segment; refused")
        if len(segment.encode("utf-8", "surrogateescape")) > 255:
            raise SkillImportError(f"entry {shown[:80]}... has a path segment longer than 255 bytes")
    if len(segments) > limits.max_depth:
        raise SkillImportError(f"entry {shown} is nested deeper than {limits.max_depth} folders")
    return segments, is_dir


def _check_tree(paths: dict[str, bool]) -> None:
    """No path may be a file and a folder at once (``a`` file and ``a/b``)."""
    files = {p for p, is_dir in paths.items() if not is_dir}
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in files:
                raise SkillImportError(f"{parent!r} is both a file and a folder in the archive")


def _skill_layout(paths: dict[str, bool]) -> str:
    """The skill folder name inside the archive ("" for SKILL.md at the top)."""
    if paths.get(ENTRY_FILE) is False:
        return ""
    tops = {p.split("/", 1)[0] for p in paths}
    if len(tops) == 1:
        top = next(iter(tops))
        if paths.get(f"{top}/{ENTRY_FILE}") is False:
            return top
    raise SkillImportError(
        f"the archive must hold one skill: {ENTRY_FILE} at its top, or one folder with {ENTRY_FILE} inside"
    )


def _local_data_range(fp: BinaryIO, info: zipfile.ZipInfo) -> tuple[int, int]:
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise SkillImportError(f"entry {info.orig_filename!r}: truncated local header")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != _LOCAL_SIGNATURE:
        raise SkillImportError(f"entry {info.orig_filename!r}: bad local header signature")
    name_len, extra_len = fields[9], fields[10]
    start = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
    return info.header_offset, start + info.compress_size


def bundle_from_zip(
    archive: str | os.PathLike | BinaryIO, *, limits: ImportLimits, original_name: str = ""
) -> SkillBundle:
    """Inspect and read a ZIP archive into a :class:`SkillBundle` (see the module docstring)."""
    if isinstance(archive, (str, os.PathLike)):
        try:
            size = os.stat(archive).st_size
        except OSError as exc:
            raise SkillImportError(f"cannot read the archive: {exc.strerror}") from None
        if size > limits.max_total_bytes + 1024 * 1024 + limits.max_files * 512:
            raise SkillImportError(f"the archive itself has {_fmt_bytes(size)}; too large")
        with open(archive, "rb") as fh:
            data = fh.read()
        original_name = original_name or os.path.basename(os.fspath(archive))
    else:
        data = archive.read(limits.max_total_bytes + 1024 * 1024 + limits.max_files * 512 + 1)
        if len(data) > limits.max_total_bytes + 1024 * 1024 + limits.max_files * 512:
            raise SkillImportError("the archive itself is too large")
    fp = io.BytesIO(data)
    try:
        zf = zipfile.ZipFile(fp)
    except zipfile.BadZipFile as exc:
        raise SkillImportError(f"not a valid ZIP archive: {exc}") from None
    except (zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise SkillImportError(f"cannot read the ZIP archive: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_files:
            raise SkillImportError(f"the archive has {len(infos)} entries; the limit is {limits.max_files}")
        paths: dict[str, bool] = {}
        members: list[tuple[zipfile.ZipInfo, str]] = []
        declared_total = 0
        for info in infos:
            raw = info.orig_filename
            if raw.startswith(IGNORED_PREFIXES):
                continue
            segments, is_dir = check_member_name(raw, limits=limits)
            mode = info.external_attr >> 16
            kind = stat.S_IFMT(mode)
            if kind in _TYPE_NAMES:
                raise SkillImportError(f"entry {raw!r} is {_TYPE_NAMES[kind]}; only files and folders are accepted")
            if kind == stat.S_IFDIR:
                is_dir = True
            elif kind not in (0, stat.S_IFREG):
                raise SkillImportError(f"entry {raw!r} has an unknown file type {oct(kind)}")
            if info.flag_bits & 0x1:
                raise SkillImportError(f"entry {raw!r} is encrypted; refused")
            if info.compress_type not in _SUPPORTED_METHODS:
                raise SkillImportError(
                    f"entry {raw!r} uses compression method {info.compress_type}; only stored and deflate are accepted"
                )
            path = "/".join(segments)
            if path in paths:
                raise SkillImportError(f"entry {path!r} appears more than once in the archive")
            paths[path] = is_dir
            if is_dir:
                if info.file_size:
                    raise SkillImportError(f"folder entry {raw!r} carries data")
                continue
            if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
                raise SkillImportError(
                    f"entry {raw!r} is stored uncompressed but its sizes lie "
                    f"({info.compress_size} bytes stored, {info.file_size} declared)"
                )
            if info.compress_size > info.file_size + info.file_size // 100 + 64:
                raise SkillImportError(
                    f"entry {raw!r}: its sizes lie ({info.compress_size} compressed bytes cannot "
                    f"unpack to only {info.file_size})"
                )
            declared_total += info.file_size
            if declared_total > limits.max_total_bytes:
                raise SkillImportError(
                    f"the archive would unpack to more than {_fmt_bytes(limits.max_total_bytes)} "
                    f"(entry {raw!r} declares {_fmt_bytes(info.file_size)})"
                )
            if info.file_size > limits.ratio_floor and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                ratio = info.file_size // max(info.compress_size, 1)
                raise SkillImportError(
                    f"entry {raw!r} expands {ratio}:1 ({_fmt_bytes(info.compress_size)} to "
                    f"{_fmt_bytes(info.file_size)}); that looks like a compression bomb"
                )
            members.append((info, path))
        _check_tree(paths)
        folder = _skill_layout(paths)

        # Overlapping entries (several names sharing compressed data) are a bomb construction.
        ranges = sorted(_local_data_range(fp, info) for info in infos)
        for (_start_a, end_a), (start_b, _end_b) in zip(ranges, ranges[1:], strict=False):
            if start_b < end_a:
                raise SkillImportError("archive entries overlap each other (a zip-bomb construction); refused")
        if ranges and ranges[-1][1] > zf.start_dir:
            raise SkillImportError("an archive entry overlaps the central directory; refused")

        files: dict[str, bytes] = {}
        total = 0
        prefix = f"{folder}/" if folder else ""
        for info, path in members:
            chunks: list[bytes] = []
            got = 0
            try:
                with zf.open(info) as member:
                    while True:
                        chunk = member.read(1 << 16)
                        if not chunk:
                            break
                        got += len(chunk)
                        total += len(chunk)
                        if got > info.file_size or total > limits.max_total_bytes:
                            raise SkillImportError(f"entry {info.orig_filename!r} unpacks to more than it declares")
                        chunks.append(chunk)
            except SkillImportError:
                raise
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
                raise SkillImportError(f"entry {info.orig_filename!r} is corrupt: {exc}") from None
            if got != info.file_size:
                raise SkillImportError(f"entry {info.orig_filename!r} is shorter than it declares")
            files[path[len(prefix) :]] = b"".join(chunks)
        dirs = {p[len(prefix) :] for p, is_dir in paths.items() if is_dir and p.startswith(prefix)}
    return SkillBundle(
        folder_name=folder,
        files=files,
        dirs=dirs,
        source="zip",
        original_name=original_name,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def bundle_from_folder(folder: str | os.PathLike, *, limits: ImportLimits) -> SkillBundle:
    """Read a local skill folder (``SKILL.md`` at its top) into a bundle; symlinks are refused."""
    top = Path(os.path.abspath(folder))
    try:
        st = os.lstat(top)
    except OSError as exc:
        raise SkillImportError(f"cannot read {top}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        top = Path(os.path.realpath(top))
        st = os.lstat(top)
    if not stat.S_ISDIR(st.st_mode):
        raise SkillImportError(f"{top} is not a folder")
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    total = 0
    count = 0
    stack = [("", os.fspath(top))]
    while stack:
        rel_dir, full_dir = stack.pop()
        try:
            with os.scandir(full_dir) as it:
                entries = sorted(it, key=lambda e: os.fsencode(e.name))
        except OSError as exc:
            raise SkillImportError(f"cannot list {full_dir}: {exc.strerror}") from None
        for entry in entries:
            rel = f"{rel_dir}{entry.name}"
            if entry.name == ".git" and not rel_dir:
                continue
            count += 1
            if count > limits.max_files:
                raise SkillImportError(f"the folder has more than {limits.max_files} entries")
            check_member_name(rel, limits=limits)
            est = os.lstat(entry.path)
            kind = stat.S_IFMT(est.st_mode)
            if kind == stat.S_IFDIR:
                dirs.add(rel)
                stack.append((rel + "/", entry.path))
                continue
            if kind != stat.S_IFREG:
                raise SkillImportError(
                    f"{rel!r} is {_TYPE_NAMES.get(kind, 'not a regular file')}; only files and folders are accepted"
                )
            total += est.st_size
            if total > limits.max_total_bytes:
                raise SkillImportError(f"the folder holds more than {_fmt_bytes(limits.max_total_bytes)}")
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise SkillImportError(f"{rel!r} changed while it was read")
                parts: list[bytes] = []
                got = 0
                while got <= est.st_size:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    parts.append(chunk)
                    got += len(chunk)
                content = b"".join(parts)
            finally:
                os.close(fd)
            if len(content) != est.st_size:
                raise SkillImportError(f"{rel!r} changed while it was read")
            files[rel] = content
    if ENTRY_FILE not in files:
        raise SkillImportError(f"{top} has no {ENTRY_FILE} at its top")
    return SkillBundle(folder_name=top.name, files=files, dirs=dirs, source="folder-import", original_name=str(top))
