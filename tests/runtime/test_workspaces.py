"""A workspace per session (or user), resolved in one place — and the proof that it isolates.

Real turns with the scripted model, real bash under real bubblewrap, real files:
two users of one agent cannot see or change each other's files, through bash or
the file tools, and a hard link carried in from outside is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from runtime.agents.workspaces import (
    WorkspaceError,
    preview_cwd,
    workspace_for,
    workspace_layout,
)
from runtime.models import ModelConfig, RunStatus, WorkspaceMode
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_fork, session_start
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider
from tests.support.services import require
from tests.support.rules import rules
from toolcatalog import sandbox

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def prompt(session_id: str, text: str, user) -> list[dict]:
    """Run one prompt to the end; the toolResult messages it produced."""
    outcome = session_prompt(session_id=session_id, text=text, actor=user, dispatch=False)
    run = execute_run(outcome.run.run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    provider = get_provider("file")
    path = [e for e in provider.get_active_path(session_id) if e["type"] == "message"]
    last_user = max(i for i, e in enumerate(path) if e["message"]["role"] == "user")
    return [e["message"] for e in path[last_user:] if e["message"]["role"] == "toolResult"]


def text_of(result: dict) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b.get("type") == "text")


def script(model: ModelConfig, *rule_list) -> None:
    """Give the agent's scripted model new rules (read by every run)."""
    model.options = {"rules": rules(*rule_list)}
    model.save(update_fields=["options"])


def calls(match: str, *tool_calls: tuple[str, dict]) -> dict:
    return {
        "match": {"contains": match},
        "replies": [
            [{"tool_call": {"name": name, "arguments": args}} for name, args in tool_calls],
            [{"text": "done"}],
        ],
    }


# --- resolution -----------------------------------------------------------------------


def test_per_session_is_the_default_and_the_session_records_its_directory(make_agent, workspace, alice):
    agent = make_agent(rules())
    assert agent.workspace_mode == WorkspaceMode.PER_SESSION
    meta = session_start(agent=agent, user=alice)
    expected = workspace / "sessions" / meta.session_id
    assert meta.cwd == str(expected)  # the Pi header's cwd is where the session works
    assert not expected.exists()  # created on first use, not before
    header = Path(meta.session_file).read_text().splitlines()[0]
    assert f'"cwd":"{expected}"' in header.replace(" ", "")
    ws = workspace_for(agent, meta)
    assert ws.cwd == expected and ws.roots[0] == expected
    assert mode_of(expected) == 0o700 and mode_of(expected.parent) == 0o700


def test_per_user_and_shared(make_agent, workspace, alice, bob):
    agent = make_agent(rules(), workspace_mode=WorkspaceMode.PER_USER)
    a1, a2, b1 = (session_start(agent=agent, user=u) for u in (alice, alice, bob))
    assert workspace_for(agent, a1).cwd == workspace_for(agent, a2).cwd == workspace / "users" / str(alice.pk)
    assert workspace_for(agent, b1).cwd == workspace / "users" / str(bob.pk)
    assert mode_of(workspace / "users" / str(bob.pk)) == 0o700
    agent.workspace_mode = WorkspaceMode.SHARED
    agent.save()
    assert workspace_for(agent, a1).cwd == workspace_for(agent, b1).cwd == workspace
    assert workspace_layout(agent).startswith("shared:") and preview_cwd(agent) == str(workspace)


def test_a_fork_continues_in_its_parents_directory_for_the_same_user_only(make_agent, workspace, alice, bob):
    agent = make_agent(rules())
    meta = session_start(agent=agent, user=alice)
    prompt(meta.session_id, "hello", alice)
    entry = get_provider("file").get_session(meta.session_id).leaf_entry_id
    own_fork = session_fork(session_id=meta.session_id, entry_id=entry, actor=alice)
    assert workspace_for(agent, own_fork).cwd == workspace_for(agent, meta).cwd
    assert own_fork.cwd == meta.cwd
    foreign_fork = session_fork(session_id=meta.session_id, entry_id=entry, actor=bob)
    assert workspace_for(agent, foreign_fork).cwd == workspace / "sessions" / foreign_fork.session_id


def test_unsafe_names_and_planted_symlinks_are_refused(make_agent, workspace, alice, tmp_path):
    agent = make_agent(rules())
    with pytest.raises(WorkspaceError, match="cannot name a workspace directory"):
        workspace_for(agent, AgentSession(session_id="../../etc", user=alice, agent=agent.name))
    meta = session_start(agent=agent, user=alice)
    (workspace / "sessions").mkdir(mode=0o700)
    (workspace / "sessions" / meta.session_id).symlink_to(tmp_path)
    with pytest.raises(WorkspaceError, match="symlink"):
        workspace_for(agent, meta)


def test_extra_roots_that_would_show_other_users_are_refused(make_agent, workspace, tmp_path, alice):
    agent = make_agent(rules(), workspace_roots=[str(workspace.parent)])
    with pytest.raises(ValidationError) as err:
        agent.full_clean()
    assert "workspace_mode" in err.value.message_dict
    meta = session_start(agent=agent, user=alice)
    assert workspace_for(agent, meta).roots == (workspace / "sessions" / meta.session_id,)  # dropped at run time
    (tmp_path / "docs").mkdir()
    agent.workspace_roots = [str(tmp_path / "docs")]
    agent.full_clean()
    assert workspace_for(agent, meta).roots[1:] == (tmp_path / "docs",)


def test_a_shared_agent_cannot_share_the_workspace_of_an_isolated_one(make_agent, workspace):
    make_agent(rules(), name="private")
    shared = make_agent(rules(), name="open", workspace_mode=WorkspaceMode.SHARED)
    with pytest.raises(ValidationError) as err:
        shared.full_clean()
    assert "'private'" in " ".join(err.value.message_dict["workspace_mode"])


def test_a_workspace_inside_the_servers_stores_is_refused(make_agent, workspace, settings):
    agent = make_agent(rules())
    agent.cwd = str(settings.NETA_SESSIONS_DIR / "ws")
    with pytest.raises(ValidationError) as err:
        agent.full_clean()
    assert "never touch" in " ".join(err.value.message_dict["workspace_mode"])


def test_a_workspace_path_too_long_for_session_folders_is_refused(make_agent, workspace):
    agent = make_agent(rules())
    agent.cwd = "/" + "w" * 220
    with pytest.raises(ValidationError) as err:
        agent.full_clean()
    assert "200 bytes" in err.value.message_dict["cwd"][0]


# --- the proof: two users of one agent under bubblewrap -------------------------------------------


@pytest.fixture
def under_bwrap(settings):
    sandbox.reset_sandbox_probe()
    require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    settings.NETA_SANDBOX = "auto"  # the default: picks bwrap here
    assert sandbox.effective_sandbox().mode == "bwrap"
    yield
    sandbox.reset_sandbox_probe()


@pytest.mark.parametrize("mode", [WorkspaceMode.PER_SESSION, WorkspaceMode.PER_USER])
def test_two_users_of_one_agent_cannot_see_each_others_files(make_agent, workspace, alice, bob, under_bwrap, mode):
    agent = make_agent(rules(), workspace_mode=mode)
    sa, sb = session_start(agent=agent, user=alice), session_start(agent=agent, user=bob)
    mine, theirs = workspace_for(agent, sa, create=False).cwd, workspace_for(agent, sb, create=False).cwd
    assert mine != theirs
    script(agent.model, calls(
        "alice writes",
        ("bash", {"command": "echo ALICE-DIARY > diary.txt; pwd; hostname"}),
        ("write", {"path": "notes.txt", "content": "ALICE-NOTES\n"}),
    ), calls(
        "alice reads",
        ("bash", {"command": "cat diary.txt notes.txt"}),
    ), calls(
        "bob snoops",
        ("bash", {"command": (
            f"cat {mine}/diary.txt; cat ../*/diary.txt ../../*/*/diary.txt; ls -A {workspace} ..; "
            f"find / -name diary.txt 2>/dev/null; echo BOB > {mine}/diary.txt; echo end"
        )}),
        ("read", {"path": f"{mine}/notes.txt"}),
        ("read", {"path": f"../{mine.name}/notes.txt"}),
        ("ls", {"path": str(workspace)}),
        ("grep", {"pattern": "ALICE", "path": str(mine)}),
        ("find", {"pattern": "**/diary.txt", "path": ".."}),
        ("write", {"path": f"{mine}/notes.txt", "content": "BOB\n"}),
        ("edit", {"path": f"{mine}/notes.txt", "edits": [{"oldText": "ALICE", "newText": "BOB"}]}),
    ))
    wrote = prompt(sa.session_id, "alice writes", alice)
    assert [r["isError"] for r in wrote] == [False, False]
    assert text_of(wrote[0]).split() == [str(mine), "neta-sandbox"]  # under bwrap, in her own directory
    snooped = prompt(sb.session_id, "bob snoops", bob)
    assert len(snooped) == 8
    for result in snooped:
        assert "ALICE" not in text_of(result), text_of(result)
    assert text_of(snooped[0]).rstrip().endswith("end")
    assert all(r["isError"] for r in snooped[1:]), [text_of(r) for r in snooped]
    assert "outside the workspace roots" in text_of(snooped[1])
    # Alice's files are untouched, and she still sees them.
    assert (mine / "diary.txt").read_text() == "ALICE-DIARY\n" and (mine / "notes.txt").read_text() == "ALICE-NOTES\n"
    assert not any(p.name == "diary.txt" for p in theirs.rglob("*"))
    again = prompt(sa.session_id, "alice reads", alice)
    assert text_of(again[0]) == "ALICE-DIARY\nALICE-NOTES\n"


def test_a_hard_link_carried_over_from_an_unsandboxed_run_is_refused(make_agent, workspace, alice, settings, tmp_path):
    """Under none a command links the server's secret key into the workspace; under bwrap it is refused."""
    sandbox.reset_sandbox_probe()
    require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    var = tmp_path / "var"
    var.mkdir()
    secret = var / "secret_key"
    secret.write_text("SERVER-SECRET-KEY\n")
    settings.VAR_DIR = var
    agent = make_agent(rules(calls("link it", ("bash", {"command": f"ln {secret} k.txt && echo linked"})),
                             calls("read it", ("read", {"path": "k.txt"}), ("bash", {"command": "cat k.txt"}))))
    meta = session_start(agent=agent, user=alice)
    settings.NETA_SANDBOX = "none"  # the sandbox was off when the link was made
    made = prompt(meta.session_id, "link it", alice)
    assert text_of(made[0]).strip() == "linked"
    assert os.stat(secret).st_nlink == 2
    settings.NETA_SANDBOX = "auto"  # later: bubblewrap
    assert sandbox.effective_sandbox().mode == "bwrap"
    read, cat = prompt(meta.session_id, "read it", alice)
    assert read["isError"] and "hard links" in text_of(read)
    assert cat["isError"] and "hard-linked" in text_of(cat)
    assert "SERVER-SECRET-KEY" not in text_of(read) + text_of(cat)
    sandbox.reset_sandbox_probe()


def test_a_deleted_sessions_directory_goes_with_it_and_an_import_of_its_id_starts_empty(
    make_agent, workspace, alice, bob, under_bwrap, tmp_path
):
    """Alice deletes a session; Bob imports a Pi file carrying its id (a deleted id is free, so the
    import keeps it). Bob's session must not work in Alice's old directory."""
    from runtime.sessions.services import session_delete, session_import
    from sessions_tree.pi_files import export_session

    agent = make_agent(rules(
        calls("alice writes", ("bash", {"command": "echo ALICE-DIARY > diary.txt"})),
        calls("bob looks", ("bash", {"command": "pwd; ls -A; cat diary.txt; echo end"}), ("read", {"path": "diary.txt"})),
    ))
    meta = session_start(agent=agent, user=alice)
    prompt(meta.session_id, "alice writes", alice)
    old = workspace_for(agent, meta, create=False).cwd
    assert (old / "diary.txt").exists()
    shared_file = tmp_path / "alice.jsonl"
    export_session(meta.session_id, shared_file)  # Alice once shared an export of it
    session_delete(actor=None, session_id=meta.session_id)
    assert not old.exists()  # the session's directory is deleted with it
    imported = session_import(path=shared_file, actor=bob, agent_name=agent.name)
    assert imported.session_id == meta.session_id  # the id was free again
    looked = prompt(imported.session_id, "bob looks", bob)
    assert "ALICE" not in text_of(looked[0]) + text_of(looked[1]), text_of(looked[0])
    assert text_of(looked[0]).rstrip().endswith("end")
    assert looked[1]["isError"]


def test_a_fork_keeps_the_files_of_the_directory_it_shared_when_its_parent_is_deleted(make_agent, workspace, alice):
    """A fork (same user and agent) works in its parent's directory; deleting the parent hands
    that directory to the fork instead of deleting the fork's files with it."""
    from runtime.sessions.services import session_delete

    agent = make_agent(rules(
        calls("write notes", ("bash", {"command": "echo NOTES > notes.txt"})),
        calls("read notes", ("read", {"path": "notes.txt"})),
    ))
    parent = session_start(agent=agent, user=alice)
    prompt(parent.session_id, "write notes", alice)
    shared = workspace_for(agent, parent, create=False).cwd
    leaf = AgentSession.objects.get(pk=parent.pk).leaf_entry_id
    fork = session_fork(session_id=parent.session_id, entry_id=leaf, actor=alice)
    assert workspace_for(agent, fork, create=False).cwd == shared  # it works in its parent's directory

    session_delete(actor=None, session_id=parent.session_id)

    assert not shared.exists()  # nothing is left under the freed id
    fork = AgentSession.objects.get(pk=fork.pk)
    mine = workspace_for(agent, fork, create=False).cwd
    assert mine.name == fork.session_id and (mine / "notes.txt").read_text() == "NOTES\n"
    (result,) = prompt(fork.session_id, "read notes", alice)
    assert not result["isError"] and "NOTES" in text_of(result)


def test_deleting_a_session_handed_to_another_agent_removes_its_directories_in_both_workspaces(
    make_agent, workspace, alice, tmp_path
):
    from runtime.sessions.services import session_delete, session_set_agent

    first = make_agent(rules(calls("write here", ("bash", {"command": "echo ALICE > a.txt"}))), name="first")
    second = make_agent(rules(calls("write here", ("bash", {"command": "echo ALICE > b.txt"}))), name="second")
    elsewhere = tmp_path / "second-workspace"
    elsewhere.mkdir()
    type(second).objects.filter(pk=second.pk).update(cwd=str(elsewhere))
    second.refresh_from_db()
    meta = session_start(agent=first, user=alice)
    prompt(meta.session_id, "write here", alice)
    session_set_agent(actor=None, session_id=meta.session_id, agent_name="second")
    prompt(meta.session_id, "write here", alice)
    dirs = [workspace / "sessions" / meta.session_id, elsewhere / "sessions" / meta.session_id]
    assert all(d.is_dir() for d in dirs)
    session_delete(actor=None, session_id=meta.session_id)
    assert [d.exists() for d in dirs] == [False, False]


# --- where operators look ----------------------------------------------------------------------


@pytest.mark.parametrize("hidden", [False, True], ids=["bwrap-works", "bwrap-hidden"])
def test_the_console_and_the_chat_page_say_which_sandbox_and_workspace(
    make_agent, client, django_user_model, settings, hidden
):
    sandbox.reset_sandbox_probe()
    settings.NETA_SANDBOX = "auto"
    if hidden:
        settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    else:
        require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    agent = make_agent(rules(), name="default", workspace_mode=WorkspaceMode.SHARED)
    staff = django_user_model.objects.create_user("op", password="pw", is_staff=True, is_superuser=True)
    client.force_login(staff)
    listing = client.get("/admin/runtime/agent/").content.decode()
    page = client.get(f"/admin/runtime/agent/{agent.pk}/change/").content.decode()
    chat = client.get(f"/?agent={agent.name}")
    sandbox.reset_sandbox_probe()
    assert "shared (deliberate)" in listing
    assert "shared: every user of the agent works in" in page
    info = chat.context["data"]["agent"]
    assert info["workspaceMode"] == "shared"
    if hidden:
        assert "sandbox: none — bwrap is not installed" in listing and "sandbox: none — " in page
        assert info["sandbox"]["mode"] == "none" and "/nonexistent/bwrap" in info["sandbox"]["reason"]
    else:
        assert "sandbox: bwrap (auto)" in listing and "sandbox: bwrap (auto)" in page
        assert info["sandbox"] == {"configured": "auto", "mode": "bwrap", "reason": "bubblewrap works here"}
