"""The server's secrets stay out of the tools' reach, and hard links from outside are refused.

Real files, real hard links, real bubblewrap. The worst case is a workspace root that
contains the server's var directory (secret key, admin password, SQLite database,
sessions): the file tools refuse those paths whatever the roots say, and bubblewrap
masks them.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from neta.env import secret_files
from tests.support.services import REPO
from tests.toolcatalog.helpers import SECRET
from toolcatalog.protected_paths import outside_hard_links, protected_paths
from toolcatalog.protocol import ToolContext, get_tool, run_tool


def call(ctx: ToolContext, name: str, **args):
    return run_tool(get_tool(name), ctx, args)


@pytest.fixture
def var_dir(tmp_path, settings, monkeypatch):
    """A var directory laid out like the embedded default, configured as the server's."""
    var = tmp_path / "var"
    (var / "workspace").mkdir(parents=True)
    (var / "sessions" / "--w--").mkdir(parents=True)
    (var / "secret_key").write_text(f"key-{SECRET}\n")
    (var / "admin-password").write_text(f"pw-{SECRET}\n")
    (var / "sessions" / "--w--" / "s.jsonl").write_text(f'{{"type":"session","cwd":"{SECRET}"}}\n')
    db = var / "neta.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (v text)")
        conn.execute("insert into t values (?)", (f"hash-{SECRET}",))
    settings.VAR_DIR = var
    settings.NETA_SESSIONS_DIR = var / "sessions"
    # An extra SQLite alias, as the embedded default has (the test database itself may be in memory).
    monkeypatch.setitem(django_settings.DATABASES, "embedded", {"ENGINE": "django.db.backends.sqlite3", "NAME": str(db)})
    return var


def test_the_built_in_protected_paths(var_dir, settings, monkeypatch, tmp_path):
    elsewhere = tmp_path / "elsewhere.key"
    monkeypatch.setenv("NETA_SECRET_KEY_FILE", str(elsewhere))
    settings.NETA_SECRET_FILES = secret_files()  # what settings read at start-up
    settings.NETA_TOOL_DENY_PATHS = [str(tmp_path / "extra")]
    protected = set(protected_paths())
    expected = {var_dir / "secret_key", var_dir / "admin-password", var_dir / "neta.sqlite3",
                var_dir / "neta.sqlite3-wal", var_dir / "sessions", elsewhere, tmp_path / "extra"}
    assert expected <= protected


def test_the_resolution_follows_the_settings_at_once_and_the_disk_within_seconds(var_dir, settings, monkeypatch, tmp_path):
    """Resolved paths are reused a few seconds for the same settings (a context is built per
    round of tool calls); a settings change is seen at once, a symlink moved on disk when
    the reuse ends, and a context takes the resolved list without resolving it again."""
    from toolcatalog import protected_paths as pp

    target_a, target_b = tmp_path / "a", tmp_path / "b"
    target_a.mkdir()
    target_b.mkdir()
    link = tmp_path / "deny-link"
    link.symlink_to(target_a)
    settings.NETA_TOOL_DENY_PATHS = [str(link)]
    assert target_a in protected_paths()
    settings.NETA_TOOL_DENY_PATHS = [str(link), str(tmp_path / "more")]
    assert tmp_path / "more" in protected_paths()  # new settings: resolved now
    link.unlink()
    link.symlink_to(target_b)
    assert target_a in protected_paths()  # the same settings within the reuse window
    monkeypatch.setattr(pp, "RESOLVED_SECONDS", 0.0)
    now = protected_paths()
    assert target_b in now and target_a not in now
    ctx = ToolContext(roots=(var_dir,), sandbox="none")
    assert target_b in ctx.protected and type(ctx.protected) is type(now)
    by_hand = ToolContext(roots=(var_dir,), sandbox="none", protected=(str(link),))  # a caller's own list is resolved
    assert by_hand.protected == (target_b,)


def test_a_workspace_check_follows_the_state_directory_at_once(settings, tmp_path):
    """The folders a workspace is checked against are reused a few seconds (every turn checks
    its agent's), keyed by the settings: a new state directory counts at once."""
    from toolcatalog.protected_paths import workspace_path_problem

    workspace, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    settings.VAR_DIR = str(workspace / "var")
    assert "holds the state directory" in workspace_path_problem(str(workspace))
    assert workspace_path_problem(str(workspace / "var" / "workspace")) is None  # its own workspaces
    settings.VAR_DIR = str(elsewhere / "var")
    assert workspace_path_problem(str(workspace)) is None
    assert "holds the state directory" in workspace_path_problem(str(elsewhere))


@pytest.mark.parametrize("name", ["secret_key", "admin-password", "neta.sqlite3", "sessions/--w--/s.jsonl"])
def test_file_tools_refuse_the_servers_files_even_inside_a_root(var_dir, name):
    ctx = ToolContext(roots=(var_dir,), sandbox="none")
    read = call(ctx, "read", path=name)
    assert read.is_error and "protected server file" in read.text_output()
    assert SECRET not in read.text_output()
    absolute = call(ctx, "read", path=str(var_dir / name))
    assert absolute.is_error and "protected" in absolute.text_output()
    write = call(ctx, "write", path=name, content="overwritten")
    assert write.is_error and "protected" in write.text_output()
    edit = call(ctx, "edit", path=name, edits=[{"oldText": "key", "newText": "x"}])
    assert edit.is_error and "protected" in edit.text_output()
    assert "overwritten" not in (var_dir / name).read_text(errors="replace")


def test_symlinks_to_the_servers_files_are_refused_too(var_dir):
    ws = var_dir / "workspace"
    (ws / "k").symlink_to(var_dir / "secret_key")
    (ws / "s").symlink_to(var_dir / "sessions")
    ctx = ToolContext(roots=(var_dir,), cwd=ws, sandbox="none")
    assert "protected" in call(ctx, "read", path="k").text_output()
    assert "protected" in call(ctx, "ls", path="s").text_output()


def test_walks_skip_the_servers_files(var_dir):
    ctx = ToolContext(roots=(var_dir,), sandbox="none")
    grep = call(ctx, "grep", pattern=SECRET, literal=True)
    assert grep.text_output().startswith("No matches found"), grep.text_output()
    found = call(ctx, "find", pattern="**").text_output()
    assert "s.jsonl" not in found and "secret_key" not in found and "neta.sqlite3" not in found
    assert "workspace/" in found


def test_bwrap_masks_the_servers_files_inside_a_root(var_dir, bwrap_ok):
    ctx = ToolContext(roots=(var_dir,), sandbox="bwrap")
    out = call(ctx, "bash", command=(
        "cat secret_key admin-password neta.sqlite3; ls -A sessions | wc -l; "
        "echo x > sessions/new 2>/dev/null; echo done"
    ))
    assert not out.is_error, out.text_output()
    text = out.text_output()
    assert SECRET not in text and text.split()[-2:] == ["0", "done"]
    assert not (var_dir / "sessions" / "new").exists()  # written, if at all, to a throw-away tmpfs
    assert (var_dir / "secret_key").read_text() == f"key-{SECRET}\n"


# --- hard links -------------------------------------------------------------------------


@pytest.fixture
def linked(workspace, outside):
    """A hard link inside the workspace to the secret file outside it (made while unsandboxed)."""
    os.link(outside / "secret.txt", workspace / "innocent.txt")
    return workspace / "innocent.txt"


def test_file_tools_refuse_a_hard_link(ctx, linked, outside):
    read = call(ctx, "read", path="innocent.txt")
    assert read.is_error and "2 hard links" in read.text_output() and SECRET not in read.text_output()
    edit = call(ctx, "edit", path="innocent.txt", edits=[{"oldText": "TOP", "newText": "x"}])
    assert edit.is_error and "hard links" in edit.text_output()
    write = call(ctx, "write", path="innocent.txt", content="mine")
    assert write.is_error and "hard links" in write.text_output()
    grep_file = call(ctx, "grep", pattern="SECRET", path="innocent.txt")
    assert grep_file.is_error and SECRET not in grep_file.text_output()
    grep_dir = call(ctx, "grep", pattern="SECRET")
    assert SECRET not in grep_dir.text_output() and grep_dir.details["hardLinkedSkipped"] == ["innocent.txt"]
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


def test_a_link_inside_the_workspace_is_refused_by_the_file_tools_as_well(ctx, workspace):
    (workspace / "a.txt").write_text("shared\n")
    os.link(workspace / "a.txt", workspace / "b.txt")
    assert "hard links" in call(ctx, "read", path="b.txt").text_output()


def test_bwrap_refuses_to_run_with_a_hard_link_from_outside(bwrap_ctx, linked, workspace):
    result = call(bwrap_ctx, "bash", command="cat innocent.txt; touch ran")
    assert result.is_error and SECRET not in result.text_output()
    assert "hard-linked" in result.text_output() and result.details["hardLinkedFiles"] == [str(linked)]
    assert not (workspace / "ran").exists()  # nothing ran
    linked.unlink()
    assert not call(bwrap_ctx, "bash", command="touch ran").is_error


def test_bwrap_runs_with_links_that_stay_inside_the_roots(bwrap_ctx, workspace):
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("mine\n")
    os.link(workspace / "a.txt", workspace / "sub" / "b.txt")
    result = call(bwrap_ctx, "bash", command="cat sub/b.txt")
    assert not result.is_error and result.text_output() == "mine\n"


def test_a_sandboxed_command_cannot_link_to_files_it_can_see_outside_the_roots(bwrap_ctx, workspace):
    """link() across bind mounts fails (EXDEV): the sandbox cannot make new outside links."""
    result = call(bwrap_ctx, "bash", command="ln /etc/passwd p 2>&1; ln /usr/bin/env e 2>&1; ls")
    assert "Invalid cross-device link" in result.text_output() or "Operation not permitted" in result.text_output()
    assert not (workspace / "p").exists() and not (workspace / "e").exists()


def test_the_scan_counts_links_per_inode(workspace, outside):
    (workspace / "a").write_text("a")
    os.link(workspace / "a", workspace / "b")
    os.link(outside / "secret.txt", workspace / "c")
    scan = outside_hard_links((workspace,))
    assert scan.offenders == (str(workspace / "c"),)
    assert outside_hard_links((workspace, outside)).offenders == ()  # both names inside the roots


def test_tool_run_refuses_the_secret_key_of_a_real_installation(tmp_path):
    """End to end: `manage.py tool_run read` on the embedded default's own var directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(NETA_VAR_DIR=str(tmp_path / "var"), PYTHONPATH=str(REPO))
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=REPO, check=True, timeout=300)
    var = tmp_path / "var"
    assert (var / "secret_key").exists() and (var / "neta.sqlite3").exists()
    for name in ("secret_key", "neta.sqlite3"):
        out = subprocess.run(
            [*manage, "tool_run", "read", "--args", f'{{"path": "{name}"}}', "--root", str(var)],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )
        assert out.returncode == 1 and "protected server file" in out.stdout, out.stdout + out.stderr
        assert (var / "secret_key").read_text().strip() not in out.stdout


def test_the_scan_rereads_only_changed_directories_and_still_sees_new_links(workspace, outside):
    for i in range(20):
        (workspace / f"d{i}").mkdir()
        (workspace / f"d{i}" / "f").write_text("x")
    first = outside_hard_links((workspace,))
    again = outside_hard_links((workspace,))
    assert first.offenders == again.offenders == () and again.rescanned == 0 and again.visited == first.visited
    target = workspace / "d7"
    before = os.stat(target)
    os.link(outside / "secret.txt", target / "evil")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # hiding the change from mtime does not help
    after = outside_hard_links((workspace,))
    assert after.offenders == (str(target / "evil"),) and after.rescanned == 1
