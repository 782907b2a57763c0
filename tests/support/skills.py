"""Skills written for tests: a ``SKILL.md`` with its files, a folder's listing, ZIP archives
built field by field (for the importer's hostile corpus and the console's upload)."""

from __future__ import annotations

import os
import stat
import struct
import zlib
from pathlib import Path

GOOD_MD = b"---\nname: good\ndescription: A good skill.\n---\nDo good things.\n"
REG = (stat.S_IFREG | 0o644) << 16
MiB = 1024 * 1024


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def entry(name, data: bytes = b"x", *, method=8, attr=REG, flags=0, usize=None, csize=None, crc=None, comp=None):
    raw_name = name if isinstance(name, bytes) else name.encode()
    if comp is None:
        comp = deflate(data) if method == 8 else data
    return {
        "name": raw_name,
        "comp": comp,
        "method": method,
        "attr": attr,
        "flags": flags,
        "usize": len(data) if usize is None else usize,
        "csize": len(comp) if csize is None else csize,
        "crc": zlib.crc32(data) if crc is None else crc,
    }


def raw_zip(entries, *, share_first_local=False) -> bytes:
    """A ZIP written field by field. ``share_first_local``: every central entry points at entry 0's data."""
    out = bytearray()
    central = bytearray()
    first_offset = None
    for e in entries:
        if share_first_local and first_offset is not None:
            offset = first_offset
        else:
            offset = len(out)
            out += struct.pack(
                "<4sHHHHHIIIHH", b"PK\x03\x04", 20, e["flags"], e["method"], 0, 0x21,
                e["crc"], e["csize"], e["usize"], len(e["name"]), 0,
            )
            out += e["name"] + e["comp"]
            first_offset = offset if first_offset is None else first_offset
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", (3 << 8) | 20, 20, e["flags"], e["method"], 0, 0x21,
            e["crc"], e["csize"], e["usize"], len(e["name"]), 0, 0, 0, 0, e["attr"], offset,
        )
        central += e["name"]
    cd_offset = len(out)
    out += central
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), cd_offset, 0)
    return bytes(out)


def good(*extra, folder="good/"):
    return [entry(f"{folder}SKILL.md", GOOD_MD), *extra]


def write_skill(
    root: Path,
    folder: str,
    *,
    name: str | None = None,
    description: str | None = "A test skill.",
    body: str = "Body.",
    extra: str = "",
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """Write ``root/folder/SKILL.md`` (frontmatter from the arguments) and extra files."""
    skill_dir = root / folder
    skill_dir.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if name is not False:
        lines.append(f"name: {name if name is not None else folder.rsplit('/', 1)[-1]}")
    if description is not None:
        lines.append(f"description: {description}")
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append("---")
    (skill_dir / "SKILL.md").write_text("\n".join(lines) + "\n" + body + "\n", encoding="utf-8")
    for rel, content in (files or {}).items():
        target = skill_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return skill_dir / "SKILL.md"


def tree_snapshot(top: Path) -> dict[str, tuple[str, int]]:
    """Every path under ``top`` (not following links) with its type and size."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[os.path.relpath(full, top)] = (oct(st.st_mode), st.st_size if not os.path.isdir(full) else 0)
    return out
