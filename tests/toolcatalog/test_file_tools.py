"""read / write / edit on real files in temp workspaces."""

from __future__ import annotations

import base64
import os
import stat
import struct
import zlib

import pytest

from toolcatalog.truncation import DEFAULT_MAX_BYTES


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")


# --- read -----------------------------------------------------------------------------


def test_read_text(call, workspace):
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    result = call("read", path="a.txt")
    assert not result.is_error
    assert result.text_output() == "one\ntwo\nthree\n"
    assert result.details is None


def test_read_absolute_path_inside_the_workspace(call, workspace):
    (workspace / "a.txt").write_text("abs")
    assert call("read", path=str(workspace / "a.txt")).text_output() == "abs"


def test_read_offset_and_limit_like_pi(call, workspace):
    (workspace / "n.txt").write_text("\n".join(f"L{i}" for i in range(1, 11)))
    result = call("read", path="n.txt", offset=3, limit=2)
    assert result.text_output() == "L3\nL4\n\n[6 more lines in file. Use offset=5 to continue.]"
    assert call("read", path="n.txt", offset=10).text_output() == "L10"
    beyond = call("read", path="n.txt", offset=11)
    assert beyond.is_error and beyond.text_output() == "Offset 11 is beyond end of file (10 lines total)"
    bad = call("read", path="n.txt", offset=0)
    assert bad.is_error and "offset: 0 is less than the minimum of 1" in bad.text_output()


def test_read_truncates_by_lines(call, workspace):
    (workspace / "big.txt").write_text("\n".join(f"row {i}" for i in range(1, 5001)))
    result = call("read", path="big.txt")
    text = result.text_output()
    assert text.endswith("\n\n[Showing lines 1-2000 of 5000. Use offset=2001 to continue.]")
    assert text.split("\n")[1999] == "row 2000"
    assert result.details["truncation"]["truncatedBy"] == "lines"
    nxt = call("read", path="big.txt", offset=2001).text_output()
    assert nxt.startswith("row 2001\n") and "Use offset=4001" in nxt


def test_read_truncates_by_bytes_on_line_boundaries(call, workspace):
    line = "漢字かな😀" * 50  # 4-byte and 3-byte characters
    (workspace / "wide.txt").write_text("\n".join([line] * 200))
    result = call("read", path="wide.txt")
    text = result.text_output()
    body, notice = text.split("\n\n[")
    assert all(part == line for part in body.split("\n"))
    assert len(body.encode()) <= DEFAULT_MAX_BYTES
    assert "(50.0KB limit)" in notice
    assert result.details["truncation"]["truncatedBy"] == "bytes"


def test_read_first_line_too_long(call, workspace):
    (workspace / "min.js").write_text("x" * (DEFAULT_MAX_BYTES * 3) + "\nsecond")
    text = call("read", path="min.js").text_output()
    assert text == "[Line 1 is 150.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' min.js | head -c 51200]"


def test_read_unicode_and_invalid_bytes(call, workspace):
    (workspace / "u.txt").write_bytes("emoji 😀 CJK 中文\n".encode() + b"bad \xff\xfe and surrogate \xed\xa0\x80 end\n")
    text = call("read", path="u.txt").text_output()
    assert "emoji 😀 CJK 中文" in text
    assert "bad \ufffd\ufffd and surrogate \ufffd\ufffd\ufffd end" in text
    text.encode("utf-8")  # no lone surrogate reached the output


def test_read_utf16_with_bom(call, workspace):
    (workspace / "w.txt").write_bytes("héllo\nwörld".encode("utf-16"))
    assert call("read", path="w.txt").text_output() == "héllo\nwörld"


def test_read_image_returns_an_image_block(call, workspace):
    png = tiny_png()
    (workspace / "pic.png").write_bytes(png)
    result = call("read", path="pic.png")
    assert not result.is_error
    assert result.content[0] == {"type": "text", "text": "Read image file [image/png]"}
    assert result.content[1]["type"] == "image" and result.content[1]["mimeType"] == "image/png"
    assert base64.b64decode(result.content[1]["data"]) == png


def test_read_refuses_binary_politely(call, workspace):
    (workspace / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)) * 10)
    result = call("read", path="blob.bin")
    assert result.is_error
    assert "blob.bin is a binary file (2.5KB)" in result.text_output()
    assert "Use bash" in result.text_output()


def test_read_refuses_fifo_and_directories(call, workspace):
    os.mkfifo(workspace / "pipe")
    fifo = call("read", path="pipe")
    assert fifo.is_error and "not a regular file" in fifo.text_output()
    (workspace / "d").mkdir()
    d = call("read", path="d")
    assert d.is_error and "is a directory" in d.text_output()
    missing = call("read", path="nope.txt")
    assert missing.is_error and missing.text_output() == "File not found: nope.txt"


def test_read_big_file_near_the_end(call, workspace):
    path = workspace / "huge.log"
    with open(path, "w") as fh:
        for i in range(1, 400_001):
            fh.write(f"{i:08d} some log line with a bit of text\n")
    assert path.stat().st_size > 15_000_000
    result = call("read", path="huge.log", offset=399_999, limit=5)
    assert result.text_output() == "00399999 some log line with a bit of text\n00400000 some log line with a bit of text\n"


# --- write ----------------------------------------------------------------------------


def test_write_creates_parents_and_overwrites(call, workspace):
    result = call("write", path="deep/er/x.txt", content="héllo 😀\n")
    assert result.text_output() == "Successfully wrote 12 bytes to deep/er/x.txt"
    assert result.details == {"bytes": 12, "created": True}
    assert (workspace / "deep/er/x.txt").read_text() == "héllo 😀\n"
    again = call("write", path="deep/er/x.txt", content="")
    assert again.details == {"bytes": 0, "created": False}
    assert (workspace / "deep/er/x.txt").read_bytes() == b""


def test_write_keeps_file_mode(call, workspace):
    target = workspace / "run.sh"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o750)
    call("write", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_write_refuses_lone_surrogates_and_leaves_the_file(call, workspace):
    (workspace / "keep.txt").write_text("original")
    result = call("write", path="keep.txt", content="ok \ud800 broken")
    assert result.is_error
    assert "lone surrogate (U+D800) at character 3" in result.text_output()
    assert (workspace / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in workspace.iterdir()) == ["keep.txt"]  # no temp file left


def test_write_refuses_directories(call, workspace):
    (workspace / "d").mkdir()
    assert "is a directory" in call("write", path="d", content="x").text_output()
    assert call("write", path="newdir/", content="x").is_error


# --- edit -----------------------------------------------------------------------------


def test_edit_multiple_replacements_against_the_original(call, workspace):
    (workspace / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = call("edit", path="m.py", edits=[{"oldText": "a = 1", "newText": "a = 10"},
                                              {"oldText": "c = 3", "newText": "c = 30\nd = 4"}])
    assert not result.is_error, result.text_output()
    assert result.text_output() == "Successfully replaced 2 blocks in m.py."
    assert (workspace / "m.py").read_text() == "a = 10\nb = 2\nc = 30\nd = 4\n"
    assert "-a = 1" in result.details["diff"] and "+d = 4" in result.details["diff"]
    assert result.details["firstChangedLine"] == 1


def test_edit_accepts_pis_legacy_arguments(call, workspace):
    (workspace / "l.txt").write_text("hello world")
    result = call("edit", path="l.txt", oldText="world", newText="there")
    assert not result.is_error
    assert (workspace / "l.txt").read_text() == "hello there"


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([{"oldText": "zzz", "newText": "y"}], "Could not find edits[0].oldText in f.txt"),
        ([{"oldText": "x", "newText": "y"}], "Found 3 occurrences of edits[0].oldText in f.txt"),
        ([{"oldText": "x1 x", "newText": "a"}, {"oldText": "x2", "newText": "b"}], "edits[0] and edits[1] overlap"),
        ([{"oldText": "x1", "newText": "x1"}], "No changes made to f.txt"),
        ([{"oldText": "", "newText": "y"}], "edits/0/oldText: '' should be non-empty"),
        ([], "edits: [] should be non-empty"),
    ],
)
def test_edit_errors_leave_the_file_untouched(call, workspace, edits, message):
    (workspace / "f.txt").write_text("x1 x2 x3")
    result = call("edit", path="f.txt", edits=edits)
    assert result.is_error
    assert message in result.text_output()
    assert (workspace / "f.txt").read_text() == "x1 x2 x3"


def test_edit_keeps_crlf_and_bom(call, workspace):
    (workspace / "w.txt").write_bytes("\ufeffone\r\ntwo\r\nthree\r\n".encode())
    result = call("edit", path="w.txt", edits=[{"oldText": "one\ntwo", "newText": "uno\ndos"}])
    assert not result.is_error, result.text_output()
    assert (workspace / "w.txt").read_bytes() == "\ufeffuno\r\ndos\r\nthree\r\n".encode()


def test_edit_refuses_files_it_would_corrupt(call, workspace):
    (workspace / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    r = call("edit", path="latin1.txt", edits=[{"oldText": "caf", "newText": "tea"}])
    assert r.is_error and "not valid UTF-8" in r.text_output()
    assert (workspace / "latin1.txt").read_bytes() == b"caf\xe9"
    (workspace / "b.bin").write_bytes(b"a\x00b")
    assert "binary" in call("edit", path="b.bin", edits=[{"oldText": "a", "newText": "c"}]).text_output()
    missing = call("edit", path="none.txt", edits=[{"oldText": "a", "newText": "c"}])
    assert missing.text_output() == "File not found: none.txt"


def test_edit_unicode(call, workspace):
    (workspace / "u.md").write_text("# 标题 😀\nbody\n")
    result = call("edit", path="u.md", edits=[{"oldText": "标题 😀", "newText": "タイトル 🎉"}])
    assert not result.is_error
    assert (workspace / "u.md").read_text() == "# タイトル 🎉\nbody\n"


def test_tilde_names_that_are_not_home_paths_are_files(call, workspace):
    assert not call("write", path="~$report.docx", content="lock").is_error
    assert (workspace / "~$report.docx").read_text() == "lock"
    assert call("read", path="~/x").text_output().startswith("Path refused: '~/x' — home-relative paths")


def test_a_file_changed_between_read_and_write_is_not_overwritten(ctx, workspace):
    from toolcatalog.file_writes import write_atomically
    from toolcatalog.paths import resolve_path
    from toolcatalog.protocol import ToolError

    target = workspace / "race.txt"
    target.write_text("v1")
    seen = os.stat(target)
    target.write_text("v2 from someone else")
    with pytest.raises(ToolError, match="changed while it was being edited"):
        write_atomically(resolve_path(ctx, "race.txt"), b"edited v1", expect=seen)
    assert target.read_text() == "v2 from someone else"


def test_read_refuses_a_socket(call, workspace):
    import socket

    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(workspace / "s.sock"))
        result = call("read", path="s.sock")
        assert result.is_error and result.text_output().startswith("Cannot open s.sock")
    finally:
        sock.close()
