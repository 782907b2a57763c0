"""The LLM side of compaction and branch summaries.

What to summarize, the prompts and the stored result are Pi's algorithms in
``sessions_tree.compaction`` / ``sessions_tree.branch_summary``; this module
only sends those requests to the agent's model and stores the entries.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.utils import timezone

from runtime import llm
from runtime.agents.specs import model_spec
from runtime.crash_points import crash_point
from runtime.llm.thinking import clamp_thinking
from runtime.models import Agent, ModelConfig
from runtime.runs import traces
from sessions_tree.branch_summary import (
    branch_summary_budget,
    branch_summary_request,
    branch_summary_result,
    collect_entries_for_branch_summary,
    prepare_branch_entries,
)
from sessions_tree.compaction import (
    CompactionSettings,
    compaction_blocked_reason,
    compaction_requests,
    compaction_result,
    prepare_compaction,
    should_compact,
    summary_reasoning,
    threshold_context_tokens,
)
from sessions_tree.ids import now_ms
from sessions_tree.providers import provider_for_session


class SummaryFailed(Exception):
    """The summarizer model failed; nothing was written."""


class SummaryCancelled(SummaryFailed):
    pass


class NothingToCompact(Exception):
    pass


def compaction_settings(agent: Agent) -> CompactionSettings:
    return CompactionSettings(
        enabled=agent.compaction_enabled,
        reserve_tokens=agent.compaction_reserve_tokens,
        keep_recent_tokens=agent.compaction_keep_recent_tokens,
    )


def summarize(spec: llm.ModelSpec, request, *, cancel: threading.Event | None = None, made: list | None = None) -> str:
    """Send one summary request; the reply's text blocks joined by newlines (Pi). ``made``
    collects (request, final, started) for the caller's trace (runs/traces.py): recorded
    in the caller's thread, whose database connection is kept."""
    sent = llm.LlmRequest(
        system_prompt=request.system_prompt,
        messages=request.llm_messages(now_ms()),
        tools=[],
        # Clamped to the levels the model accepts (runtime/llm/thinking.py).
        thinking_level=clamp_thinking(spec, request.reasoning).level if request.reasoning else "off",
        max_tokens=request.max_tokens,
        reasoning=request.reasoning is not None,
    )
    started = timezone.now()
    final = llm.complete(spec, sent, cancel=cancel)
    if made is not None:
        made.append((sent, final or {}, started))
    if final.get("stopReason") == "aborted":
        raise SummaryCancelled("summary cancelled")
    if final.get("stopReason") == "error":
        raise SummaryFailed(final.get("errorMessage") or "the summarizer returned an error")
    return "\n".join(b.get("text", "") for b in final.get("content") or [] if b.get("type") == "text")


def _record(made: list, *, run, session_id: str, purpose: str, model: ModelConfig, spec) -> None:
    for sent, final, started in made:
        traces.record_direct(run=run, session_id=session_id, purpose=purpose, name=model.name, spec=spec, request=sent, final=final, started=started)


def compact_session(
    session_id: str,
    *,
    agent: Agent,
    model: ModelConfig | None = None,
    instructions: str | None = None,
    cancel: threading.Event | None = None,
    run=None,
) -> dict:
    """Write one compaction entry at the leaf (Pi's ``compact``). Returns the entry. ``run``:
    the run that compacts (its trace records the summary calls)."""
    model = model or agent.model
    provider = provider_for_session(session_id)  # the session's store, not the agent's current setting
    path = provider.get_active_path(session_id)
    blocked = compaction_blocked_reason(path)
    if blocked:
        raise NothingToCompact(blocked)
    settings = compaction_settings(agent)
    prep = prepare_compaction(path, settings)
    if prep is None:
        raise NothingToCompact("nothing to compact")
    spec = model_spec(model)
    ctx = provider.build_context(session_id)
    reasoning = summary_reasoning(model.supports_thinking, ctx.thinking_level)
    requests = compaction_requests(prep, custom_instructions=instructions, reasoning=reasoning, settings=settings)
    with ThreadPoolExecutor(max_workers=max(1, len(requests))) as pool:  # Pi asks in parallel
        made: list = []
        futures = {r.kind: pool.submit(summarize, spec, r, cancel=cancel, made=made) for r in requests}
        try:
            replies = {kind: future.result() for kind, future in futures.items()}
        finally:
            _record(made, run=run, session_id=session_id, purpose="compaction", model=model, spec=spec)
    result = compaction_result(prep, replies)
    crash_point("compaction")
    return provider.append_compaction(
        session_id,
        summary=result["summary"],
        first_kept_entry_id=result["firstKeptEntryId"],
        tokens_before=result["tokensBefore"],
        details=result.get("details"),
        from_hook=False,
    )


def auto_compaction_due(turn) -> bool:
    """Pi's threshold rule: the context no longer leaves ``reserve`` tokens (never after an
    aborted reply). Reads nothing from the database (the turn's copy of the row)."""
    agent = turn.agent
    if not agent.compaction_enabled:
        return False
    provider, meta = turn.provider, turn.meta
    ctx = provider.build_context(turn.session_id, meta=meta)
    last = next((m for m in reversed(ctx.messages) if m.get("role") == "assistant"), None)
    if last is None or last.get("stopReason") == "aborted":
        return False
    path = provider.get_active_path(turn.session_id, meta=meta)
    tokens = threshold_context_tokens(last, path_entries=path, context_messages=ctx.messages)
    return tokens is not None and should_compact(tokens, turn.spec.context_window, compaction_settings(agent))


def maybe_auto_compact(turn) -> dict | None:
    """Pi's threshold rule (checked before a prompt and after a run): compact when the
    context no longer leaves ``reserve`` tokens (``auto_compaction_due``)."""
    if not auto_compaction_due(turn):
        return None
    agent, provider = turn.agent, turn.provider
    try:
        return compact_session(turn.session_id, agent=agent, model=turn.model, cancel=turn.control.cancel, run=turn.run)
    except NothingToCompact:
        return None
    finally:
        turn.meta = provider.get_session(turn.session_id)  # compaction wrote without the turn's copy


def switch_leaf(
    session_id: str,
    target_id: str | None,
    *,
    agent: Agent,
    summarize_branch: bool = False,
    instructions: str | None = None,
    replace_instructions: bool = False,
    cancel: threading.Event | None = None,
) -> dict:
    """Pi's ``/tree`` navigation. Returns ``{leafId, editorText, summaryEntry}``.

    A user message (or custom message) as target moves the leaf to its parent and
    hands its text back for editing; any other target becomes the leaf. With
    ``summarize_branch`` the abandoned branch is summarized into a
    ``branch_summary`` entry that becomes the new leaf.
    """
    provider = provider_for_session(session_id)  # the session's store, not the agent's current setting
    meta = provider.get_session(session_id)
    if target_id is not None and target_id == meta.leaf_entry_id:
        provider.navigation_target(session_id, target_id)  # still EntryNotFound for a leaf whose line is gone
        return {"leafId": meta.leaf_entry_id, "editorText": None, "summaryEntry": None}
    if summarize_branch and meta.leaf_entry_id is not None and target_id is not None:
        new_leaf, editor_text = provider.navigation_target(session_id, target_id)
        entries = collect_entries_for_branch_summary(provider.index_for(session_id).entry_map(), meta.leaf_entry_id, target_id)
        if entries:
            model = agent.model
            budget = branch_summary_budget(model.context_window, agent.branch_summary_reserve_tokens)
            messages, file_ops = prepare_branch_entries(entries, budget)
            reply = None
            if messages:
                request = branch_summary_request(messages, custom_instructions=instructions, replace_instructions=replace_instructions)
                made: list = []
                try:
                    reply = summarize(model_spec(model), request, cancel=cancel, made=made)
                finally:
                    _record(made, run=None, session_id=session_id, purpose="branch_summary", model=model, spec=model_spec(model))
            result = branch_summary_result(reply, file_ops)
            summary_entry = provider.append_branch_summary(
                session_id, from_entry_id=new_leaf, summary=result["summary"], details=result.get("details"), from_hook=False
            )
            return {"leafId": summary_entry["id"], "editorText": editor_text, "summaryEntry": summary_entry}
    new_leaf, editor_text = provider.navigate(session_id, target_id)
    return {"leafId": new_leaf, "editorText": editor_text, "summaryEntry": None}
