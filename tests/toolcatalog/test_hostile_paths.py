"""A corpus of hostile paths against every path-taking tool: 0 escapes, each refused clearly.

Escapes are checked three ways: the outside secret never appears in any result,
nothing outside the workspace changes (snapshot before/after), and the system
files read through absolute paths never show up either.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.toolcatalog.helpers import SECRET
from toolcatalog.protocol import ToolContext, get_tool, preview_for_approval, run_tool

CLEAR_ERROR = re.compile(
    r"^(Path refused: |File not found: |Path not found: |Not a directory: |path is empty|"
    r".* is a directory|Directory of .* does not exist)"
)
ESCAPE_MARK = "ESCAPED-WRITE-8d1c"


def build_layout(base: Path) -> tuple[Path, Path, Path]:
    ws = base / "ws"
    outside = base / "outside"
    evil = base / "ws_evil"  # shares the workspace's name as a prefix
    for d in (ws, outside, evil):
        d.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (evil / "secret.txt").write_text(SECRET + "\n")
    (ws / "a.txt").write_text("inside\n")
    (ws / "sub").mkdir()
    links = {
        "link_out": outside,
        "secret_link": outside / "secret.txt",
        "abs_passwd": Path("/etc/passwd"),
        "rel_secret": Path("../outside/secret.txt"),
        "chain1": Path("chain2"),
        "chain2": Path("link_out"),
        "loop_a": Path("loop_b"),
        "loop_b": Path("loop_a"),
        "self_loop": Path("self_loop"),
        "dangling_out": outside / "not-yet.txt",
        "root_link": Path("/"),
        "parent_link": Path(".."),
        "proc_link": Path("/proc/self/root"),
        "evil_link": evil,
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    (ws / "sub" / "up").symlink_to(Path("../../outside"))
    return ws, outside, evil


def hostile_paths(ws: Path, outside: Path, evil: Path) -> list[str]:
    secret = outside / "secret.txt"
    paths = [
        # traversal
        "..", "../", "../..", "../outside", "../outside/secret.txt", "./../outside/secret.txt",
        "sub/../../outside/secret.txt", "sub/../../../", "a/b/../../../outside/secret.txt",
        "sub/./../.././outside/secret.txt", "../ws_evil/secret.txt", "../ws/../outside/secret.txt",
    ]
    paths += ["../" * k + "etc/passwd" for k in range(1, 11)]
    paths += [
        # absolute
        str(secret), str(outside), str(evil / "secret.txt"), str(ws) + "_evil/secret.txt",
        str(ws) + "/../outside/secret.txt", str(ws) + "/sub/../../outside", "//" + str(secret).lstrip("/"),
        "/etc/passwd", "/etc/shadow", "/", "/root", "/proc/self/environ", "/proc/self/cwd",
        "/proc/self/root/etc/passwd", "/dev/zero", "/dev/stdin", "/./etc/passwd", "/tmp",
        # encoded and look-alike traversal
        "%2e%2e/outside/secret.txt", "%2e%2e%2foutside%2fsecret.txt", "%252e%252e/outside/secret.txt",
        "..%2foutside%2fsecret.txt", ".%2e/outside/secret.txt", "%2e./outside/secret.txt",
        "%2E%2E/%2E%2E/etc/passwd", "..%5coutside%5csecret.txt", "%c0%ae%c0%ae/outside/secret.txt",
        "%e0%80%ae%e0%80%ae/outside", "sub/%2e%2e/%2e%2e/outside", "\uff0e\uff0e/outside/secret.txt",
        "\u2025/outside/secret.txt", "..\\outside\\secret.txt", "..\\..\\etc\\passwd", "sub\\..\\..\\outside",
        # NUL and control characters
        "a.txt\x00", "../outside\x00.txt", "\x00", "a\x00/../../outside", "a\nb", "line\r", "esc\x1b[31m",
        "del\x7f", "tab\there", "a%00b/../../outside", "%00",
        # trailing slashes
        "../outside/", "a.txt/", "a.txt//", "../outside/secret.txt/", "/etc/passwd/", "secret_link/",
        # long names
        "a" * 256, "😀" * 64, "x" * 5000, ("d" * 200 + "/") * 25, "../" * 1400,
        # symlinks
        "link_out", "link_out/", "link_out/secret.txt", "secret_link", "abs_passwd", "rel_secret",
        "chain1", "chain1/secret.txt", "loop_a", "loop_a/x", "self_loop", "self_loop/x",
        "dangling_out", "root_link/etc/passwd", "root_link", "parent_link/outside/secret.txt",
        "proc_link/etc/passwd", "evil_link/secret.txt", "sub/up/secret.txt", "sub/up",
        "link_out/../outside/secret.txt", "chain2/../outside/secret.txt",
        # home and empty
        "", "   ", "~", "~/", "~/.ssh/id_rsa", "~root/.bashrc",
        # not valid Unicode
        "\udc80", "a\ud800b.txt",
    ]
    return paths


SYSTEM = ("/etc", "/root", "/proc", "/dev", "/tmp", "/")


def is_system(path: str) -> bool:
    return path.startswith(SYSTEM) and not path.startswith(str(Path("/tmp")) + "/pytest")


def cases(ws: Path, outside: Path, evil: Path) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for p in hostile_paths(ws, outside, evil):
        out.append(("read", {"path": p}))
        if p != "":  # ls/find/grep treat an empty path as the default "."
            out.append(("ls", {"path": p}))
            out.append(("find", {"pattern": "*", "path": p}))
            out.append(("grep", {"pattern": "TOP-SECRET|root:", "path": p}))
        # Never aim writes at real system files, even though they are refused.
        if not (p.startswith("/") and not p.startswith(str(ws.parent))):
            out.append(("write", {"path": p, "content": ESCAPE_MARK}))
            out.append(("edit", {"path": p, "edits": [{"oldText": SECRET, "newText": ESCAPE_MARK}]}))
    return out


def snapshot(*dirs: Path) -> dict[str, bytes]:
    state = {}
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d, followlinks=False):
            for name in filenames + dirnames:
                full = os.path.join(dirpath, name)
                state[full] = Path(full).read_bytes() if os.path.isfile(full) and not os.path.islink(full) else b"<dir>"
    return state


def test_corpus_is_big_enough(tmp_path):
    ws, outside, evil = build_layout(tmp_path)
    assert len(hostile_paths(ws, outside, evil)) >= 100
    assert len(cases(ws, outside, evil)) >= 200


def test_hostile_paths_never_escape(tmp_path):
    ws, outside, evil = build_layout(tmp_path)
    ctx = ToolContext(roots=(ws,), sandbox="none")
    before = snapshot(outside, evil)
    ws_before = snapshot(ws)
    passwd = Path("/etc/passwd").read_text()
    refused = 0
    failures = []
    all_cases = cases(ws, outside, evil)
    for name, args in all_cases:
        result = run_tool(get_tool(name), ctx, args)
        text = result.text_output()
        if SECRET in text or "root:x:0:0" in text or passwd.splitlines()[0] in text:
            failures.append((name, args, "LEAKED", text[:200]))
        elif not result.is_error:
            failures.append((name, args, "NOT REFUSED", text[:200]))
        elif not CLEAR_ERROR.match(text):
            failures.append((name, args, "UNCLEAR", text[:200]))
        else:
            refused += 1
    assert failures == [], '\n'.join(map(repr, failures))
    assert refused == len(all_cases) >= 200
    assert snapshot(outside, evil) == before  # nothing written, edited or created outside
    assert snapshot(ws) == ws_before  # and nothing odd created inside either
    assert Path("/etc/passwd").read_text() == passwd


def test_an_approval_preview_of_a_hostile_path_shows_nothing_of_the_file(tmp_path):
    """A write or edit waiting for approval shows its diff against the file: for every hostile
    path the preview says the call is refused, never shows a byte of what lies outside."""
    ws, outside, evil = build_layout(tmp_path)
    ctx = ToolContext(roots=(ws,), sandbox="none")
    before, ws_before = snapshot(outside, evil), snapshot(ws)
    passwd_first = Path("/etc/passwd").read_text().splitlines()[0]
    shown = []
    for path in hostile_paths(ws, outside, evil):
        for name, args in (("write", {"path": path, "content": "x"}), ("edit", {"path": path, "edits": [{"oldText": "root", "newText": "x"}]})):
            preview = preview_for_approval(get_tool(name), ctx, args)
            text = repr(preview)
            if SECRET in text or passwd_first in text or (preview is not None and "diff" in preview and not preview.get("created")):
                shown.append((name, path, text[:200]))
    assert shown == []
    assert snapshot(outside, evil) == before and snapshot(ws) == ws_before  # a preview writes nothing


def test_weird_but_contained_names_stay_inside(tmp_path):
    """Legal Linux names that look odd are not refused, and they stay inside the workspace."""
    ws, outside, evil = build_layout(tmp_path)
    ctx = ToolContext(roots=(ws,), sandbox="none")
    before = snapshot(outside, evil)
    for name in ("....", "...", ".. .", "%2f", "-rf", "*", "name with spaces", "🙂.txt", "a:b"):
        result = run_tool(get_tool("write"), ctx, {"path": f"{name}/f.txt", "content": "x"})
        assert not result.is_error, (name, result.text_output())
        assert (ws / name / "f.txt").read_text() == "x"
    assert snapshot(outside, evil) == before


SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
print("ready", flush=True)
n = 0
while not os.path.exists(sys.argv[3]):
    if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
        sys.exit(f"renameat2 failed: {os.strerror(ctypes.get_errno())}")
    n += 1
print(n, flush=True)
"""


def test_symlink_swapped_during_calls_never_escapes(tmp_path):
    """Another process atomically exchanges a directory with a symlink to outside, nonstop,
    while the tools use paths through it."""
    ws, outside, _evil = build_layout(tmp_path)
    (outside / "f.txt").write_text(SECRET + "\n")
    (ws / "sw").mkdir()
    (ws / "sw" / "f.txt").write_text("inside\n")
    (ws / "sw_alt").symlink_to(outside)
    stop_file = tmp_path / "stop"
    before = snapshot(outside)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(ws / "sw"), str(ws / "sw_alt"), str(stop_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert swapper.stdout.readline().strip() == "ready"
    ctx = ToolContext(roots=(ws,), sandbox="none")
    outcomes: dict[str, int] = {}
    try:
        for i in range(300):
            for name, args in (
                ("read", {"path": "sw/f.txt"}),
                ("write", {"path": f"sw/w{i}.txt", "content": ESCAPE_MARK}),
                ("edit", {"path": "sw/f.txt", "edits": [{"oldText": SECRET, "newText": ESCAPE_MARK}]}),
                ("ls", {"path": "sw"}),
                ("grep", {"pattern": "TOP-SECRET", "path": "sw"}),
                ("find", {"pattern": "*", "path": "sw"}),
            ):
                result = run_tool(get_tool(name), ctx, args)
                text = result.text_output()
                assert SECRET not in text, (name, args, text)
                key = f"{name}:{'error' if result.is_error else 'ok'}"
                outcomes[key] = outcomes.get(key, 0) + 1
    finally:
        stop_file.write_text("stop")
        out, err = swapper.communicate(timeout=30)
    if "renameat2 failed" in err:
        pytest.skip(err.strip())
    assert int(out.split()[-1]) > 1000  # the swapper really ran all along
    assert snapshot(outside) == before  # not one write or edit landed outside
    assert outcomes.get("read:ok", 0) > 0 and outcomes.get("read:error", 0) > 0  # both states were hit
