"""The provider rule's scenario (``test_provider_rule.py``), run in the test's process on
SQLite and in a child process on MariaDB."""

from __future__ import annotations

from pathlib import Path

SUMMARY = {"match": {"system": "context summarization assistant"}, "reply": [{"text": "## Goal\nSummarized."}]}
RULES = {"version": 1, "chunk_size": 0, "rules": [SUMMARY], "default": {"reply": [{"text": "echo: {{user}}"}]}}


def scenario(workdir: Path) -> None:
    """Runs with Django set up on whatever the default database is; raises on a failure."""
    from django.conf import settings

    from runtime.models import Agent, ModelConfig, RunStatus
    from runtime.runs.prompts import session_prompt
    from runtime.runs.turn import execute_run
    from runtime.sessions.services import (
        session_compact,
        session_import,
        session_start,
        session_switch_leaf,
    )
    from sessions_tree.models import AgentSession
    from sessions_tree.pi_files import export_session
    from sessions_tree.providers import provider_for_session

    settings.NETA_SESSIONS_DIR = workdir / "sessions"
    settings.NETA_WORKSPACE_DIR = workdir / "workspace"
    model = ModelConfig.objects.create(
        name="rule-model", provider_kind="scripted", provider_name="scripted", model_id="scripted-rule", options={"rules": RULES}
    )
    agent = Agent.objects.create(name="rule-agent", model=model, cwd=str(workdir / "workspace"), session_provider="file")

    def prompt(session_id: str, text: str) -> None:
        outcome = session_prompt(actor=None, session_id=session_id, text=text, dispatch=False)
        assert outcome.queued_as is None, outcome
        run = execute_run(outcome.run.run_id)
        assert run.status == RunStatus.COMPLETED, f"{text!r} on {store(session_id)} session: {run.status} {run.error}"

    def store(session_id: str) -> str:
        return AgentSession.objects.get(session_id=session_id).provider

    def exercise(session_id: str) -> None:
        """Prompt, move the leaf with a branch summary, compact, prompt again."""
        prompt(session_id, "one")
        anchor = provider_for_session(session_id).get_active_path(session_id)[-1]["id"]
        prompt(session_id, "two")
        result = session_switch_leaf(actor=None, session_id=session_id, entry_id=anchor, summarize=True)
        assert result["summaryEntry"]["type"] == "branch_summary", result
        prompt(session_id, "three")
        assert session_compact(actor=None, session_id=session_id)["type"] == "compaction"
        prompt(session_id, "four")
        messages = provider_for_session(session_id).build_context(session_id).messages
        assert messages[-1]["content"][0]["text"] == "echo: four", messages[-1]

    file_session = session_start(agent=agent).session_id
    prompt(file_session, "before the change")
    Agent.objects.filter(pk=agent.pk).update(session_provider="mysql")
    agent.refresh_from_db()
    exercise(file_session)  # an old file session of an agent now set to mysql
    assert store(file_session) == "file"
    mysql_session = session_start(agent=agent).session_id
    assert store(mysql_session) == "mysql"  # new sessions follow the agent's setting
    prompt(mysql_session, "on mysql")
    Agent.objects.filter(pk=agent.pk).update(session_provider="file")
    agent.refresh_from_db()
    exercise(mysql_session)  # and back: the mysql session still works
    exercise(file_session)

    # A mysql session imported for a file agent takes prompts.
    exported = export_session(mysql_session, workdir / "exported.jsonl")
    provider_for_session(mysql_session).delete_session(mysql_session)
    imported = session_import(path=exported, actor=None, agent_name=agent.name, provider_kind="mysql")
    assert imported.provider == "mysql" and agent.session_provider == "file"
    prompt(imported.session_id, "after the import")
    exercise(imported.session_id)
