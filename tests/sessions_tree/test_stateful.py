"""Property-based (hypothesis, stateful): random operation sequences on both providers.

Every operation of the provider contract — appends of every entry type,
``switch_leaf``, ``reset_leaf``, branch summaries, compactions, labels,
in-flight begin/update/finalize, forks — is applied to a file-provider session
and a mysql-provider session (on SQLite) side by side. After every step:

- the two snapshots are identical once ids are named by creation order (the
  providers draw their own random entry ids and clock timestamps);
- so are the contexts, at the leaf and at a random entry;
- the context equals Pi's ``buildSessionContext`` over the stored entries;
- for each provider, the snapshot before the step plus the events the step
  logged (``apply_event``) equals a fresh snapshot.

Failing operations (an append while an entry is in flight, a label on an entry
that does not exist) must fail the same way on both and change nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sessions_tree import jsonl
from sessions_tree.context import build_session_context, estimate_context_tokens
from sessions_tree.errors import SessionTreeError
from sessions_tree.events import apply_events
from sessions_tree.index import Record, SessionIndex
from sessions_tree.providers import get_provider
from tests.support.entries import assistant_message, tool_result, user_message

pytestmark = pytest.mark.django_db

KINDS = ("file", "mysql")
TEXT = st.text(alphabet="abc xyz ü🎉\n\"", max_size=30)
_DERIVED_TIMESTAMP_ROLES = {"custom", "branchSummary", "compactionSummary"}


class Names:
    """Creation-order names for one provider's entry and session ids."""

    def __init__(self):
        self.ids: dict[str, str] = {}
        self.sessions: dict[str, str] = {}

    def __call__(self, value):
        return self.ids.get(value, value) if isinstance(value, str) else value


def canon_entry(entry: dict | None, n: Names) -> dict | None:
    if entry is None:
        return None
    out = dict(entry)
    for key in ("id", "parentId", "targetId", "fromId", "firstKeptEntryId"):
        if key in out:
            out[key] = n(out[key])
    if "timestamp" in out:
        out["timestamp"] = "<ts>"
    return out


def canon_snapshot(snap: dict, n: Names) -> dict:
    session = dict(snap["session"])
    session["sessionId"] = n.sessions[session["sessionId"]]
    session["parentSessionId"] = n.sessions.get(session["parentSessionId"], session["parentSessionId"])
    session["provider"] = "<kind>"
    session["leafEntryId"] = n(session["leafEntryId"])
    return {
        **snap,
        "session": session,
        "leafId": n(snap["leafId"]),
        "entries": [canon_entry(e, n) for e in snap["entries"]],
        "activePath": [n(i) for i in snap["activePath"]],
        "childrenByParentId": {n(k): [n(i) for i in v] for k, v in snap["childrenByParentId"].items()},
        "labelsByEntryId": {n(k): v for k, v in snap["labelsByEntryId"].items()},
        "inFlight": canon_entry(snap["inFlight"], n),
    }


def canon_context(ctx, n: Names) -> dict:
    messages = []
    for message in ctx.messages:
        if message.get("role") in _DERIVED_TIMESTAMP_ROLES:
            message = {**message, "timestamp": "<ts>"}
            if "fromId" in message:
                message["fromId"] = n(message["fromId"])
        messages.append(message)
    return {
        "messages": messages,
        "thinking": ctx.thinking_level,
        "model": ctx.model,
        "sources": [n(i) for i in ctx.source_entry_ids],
    }


class Pair:
    """One session on each provider, and what the test knows about both."""

    def __init__(self, sids: dict[str, str]):
        self.sids = sids
        self.snapshots: dict[str, dict] = {}
        self.in_flight: str | None = None  # canonical name of the entry in flight


class BothProviders(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.providers = {kind: get_provider(kind) for kind in KINDS}
        self.names = {kind: Names() for kind in KINDS}
        self.pairs: list[Pair] = []
        self.counter = 0
        self.current: Pair | None = None

    # ------------------------------------------------------------------ helpers

    def _name_entries(self, results: dict[str, list[dict]]) -> list[str]:
        """Give the entries each provider just made one shared name each."""
        made = []
        lengths = {len(v) for v in results.values()}
        assert len(lengths) == 1, f"the providers made different numbers of entries: {results}"
        for pair in zip(*(results[k] for k in KINDS)):
            name = None
            for kind, entry in zip(KINDS, pair):
                known = self.names[kind].ids.get(entry["id"])
                name = name or known
            if name is None:
                self.counter += 1
                name = f"e{self.counter}"
            for kind, entry in zip(KINDS, pair):
                self.names[kind].ids.setdefault(entry["id"], name)
            made.append(name)
        return made

    def _real(self, kind: str, name: str | None) -> str | None:
        if name is None:
            return None
        for real, canonical in self.names[kind].ids.items():
            if canonical == name:
                return real
        return name  # not an entry id: passed through unchanged (e.g. a missing id)

    def _both(self, pair: Pair, action) -> dict | None:
        """Run ``action(provider, session_id, real)`` on both; same outcome or same error."""
        outcomes = {}
        for kind in KINDS:
            real = lambda name, kind=kind: self._real(kind, name)  # noqa: E731
            try:
                outcomes[kind] = ("ok", action(self.providers[kind], pair.sids[kind], real))
            except SessionTreeError as exc:
                outcomes[kind] = ("error", type(exc).__name__)
        kinds = {o[0] for o in outcomes.values()}
        assert len(kinds) == 1, f"one provider failed, the other did not: {outcomes}"
        if "error" in kinds:
            assert outcomes["file"][1] == outcomes["mysql"][1], outcomes
            return None
        results = {kind: outcome[1] for kind, outcome in outcomes.items()}
        if all(isinstance(r, dict) and "id" in r for r in results.values()):
            self._name_entries({k: [r] for k, r in results.items()})
        return results

    def _entry_names(self, pair: Pair) -> list[str]:
        n = self.names["file"]
        return [n(e["id"]) for e in self.providers["file"].list_entries(pair.sids["file"])]

    def _pick(self, data, pair: Pair, *, allow_none: bool = False) -> str | None:
        names = self._entry_names(pair)
        choices = names + ([None] if allow_none else [])
        return data.draw(st.sampled_from(choices)) if choices else None

    def _new_pair(self, sids: dict[str, str]) -> Pair:
        pair = Pair(sids)
        number = len(self.pairs) + 1
        for kind in KINDS:
            self.names[kind].sessions[sids[kind]] = f"S{number}"
            pair.snapshots[kind] = self.providers[kind].get_snapshot(sids[kind])
        self.pairs.append(pair)
        return pair

    # ------------------------------------------------------------------ rules

    @initialize()
    def create(self):
        sids = {kind: self.providers[kind].create_session(cwd="/stateful").session_id for kind in KINDS}
        self.current = self._new_pair(sids)

    @rule(data=st.data())
    def choose_session(self, data):
        self.current = data.draw(st.sampled_from(self.pairs))

    @rule(role=st.sampled_from(["user", "assistant", "toolResult", "custom"]), text=TEXT, ts=st.integers(0, 10_000))
    def append_message(self, role, text, ts):
        if role == "user":
            message = user_message(text, ts)
        elif role == "assistant":
            message = assistant_message(text, ts=ts, tool_calls=[("c1", "read", {"path": text})] if ts % 3 == 0 else ())
        elif role == "toolResult":
            message = tool_result("c1", "read", text, ts)
        else:
            message = {"role": "custom", "customType": "x", "content": text, "display": True, "timestamp": ts}
        self._both(self.current, lambda p, sid, real: p.append_message(sid, message))

    @rule(level=st.sampled_from(["off", "low", "medium", "high"]))
    def append_thinking_level(self, level):
        self._both(self.current, lambda p, sid, real: p.append_thinking_level_change(sid, level))

    @rule(model=st.sampled_from(["a", "b"]))
    def append_model_change(self, model):
        self._both(self.current, lambda p, sid, real: p.append_model_change(sid, provider="prov", model_id=model))

    @rule(data=st.data(), summary=TEXT, tokens=st.integers(0, 99_999), missing=st.booleans())
    def append_compaction(self, data, summary, tokens, missing):
        kept = "00000000" if missing else self._pick(data, self.current)
        if kept is None:
            return
        self._both(
            self.current,
            lambda p, sid, real: p.append_compaction(
                sid, summary=summary, first_kept_entry_id=real(kept), tokens_before=tokens, details={"readFiles": []}
            ),
        )

    @rule(data=st.data(), summary=TEXT)
    def append_branch_summary(self, data, summary):
        source = self._pick(data, self.current, allow_none=True)
        self._both(self.current, lambda p, sid, real: p.append_branch_summary(sid, from_entry_id=real(source), summary=summary))

    @rule(data=st.data(), label=st.one_of(st.none(), st.sampled_from(["", "start", "mark ✓"])), missing=st.booleans())
    def append_label(self, data, label, missing):
        target = "0badf00d" if missing else self._pick(data, self.current)
        if target is None:
            return
        self._both(self.current, lambda p, sid, real: p.append_label_change(sid, target_id=real(target), label=label))

    @rule(name=TEXT)
    def append_session_info(self, name):
        self._both(self.current, lambda p, sid, real: p.append_session_info(sid, name=name))

    @rule(text=TEXT, display=st.booleans())
    def append_custom(self, text, display):
        self._both(self.current, lambda p, sid, real: p.append_custom_entry(sid, custom_type="state", data={"t": text}))
        self._both(
            self.current, lambda p, sid, real: p.append_custom_message(sid, custom_type="note", content=text, display=display)
        )

    @rule(text=TEXT)
    def append_subagent_entries(self, text):
        self._both(self.current, lambda p, sid, real: p.append_subagent_batch(sid, batch_id="b", mode="single", runs=[{"runId": "r"}]))
        self._both(
            self.current,
            lambda p, sid, real: p.append_subagent_result(
                sid, batch_id="b", run_id="r", agent="scout", status="completed", content=[{"type": "text", "text": text}]
            ),
        )

    @rule(value=st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), TEXT))
    def append_unknown_type(self, value):
        self._both(self.current, lambda p, sid, real: p.append_entry(sid, {"type": "neta_test", "value": value, "z": [value]}))

    @rule(data=st.data())
    def switch_leaf(self, data):
        target = self._pick(data, self.current)
        if target is not None:
            self._both(self.current, lambda p, sid, real: p.switch_leaf(sid, real(target)))

    @rule(data=st.data())
    def switch_leaf_forward(self, data):
        """Move the leaf to a descendant several entries down (the context grows by many at once)."""
        entries = self.providers["file"].list_entries(self.current.sids["file"])
        leaf = self.providers["file"].get_session(self.current.sids["file"]).leaf_entry_id
        children: dict = {}
        for entry in entries:
            children.setdefault(entry["parentId"], []).append(entry["id"])
        cursor, steps = leaf, data.draw(st.integers(2, 6))
        for _ in range(steps):
            below = children.get(cursor)
            if not below:
                break
            cursor = data.draw(st.sampled_from(below))
        if cursor not in (None, leaf):
            target = self.names["file"](cursor)
            self._both(self.current, lambda p, sid, real: p.switch_leaf(sid, real(target)))

    @rule()
    def reset_leaf(self):
        self._both(self.current, lambda p, sid, real: p.reset_leaf(sid))

    @precondition(lambda self: self.current is not None and self.current.in_flight is None)
    @rule(text=TEXT)
    def begin_in_flight(self, text):
        results = self._both(self.current, lambda p, sid, real: p.begin_in_flight(sid, assistant_message(text)))
        if results is not None:
            self.current.in_flight = self.names["file"](results["file"]["id"])

    @precondition(lambda self: self.current is not None and self.current.in_flight is not None)
    @rule(text=TEXT)
    def update_in_flight(self, text):
        name = self.current.in_flight
        self._both(self.current, lambda p, sid, real: p.update_in_flight_entry(sid, real(name), assistant_message(text)))

    @precondition(lambda self: self.current is not None and self.current.in_flight is not None)
    @rule(status=st.sampled_from(["completed", "aborted", "failed"]), text=st.one_of(st.none(), TEXT))
    def finalize_in_flight(self, status, text):
        name = self.current.in_flight
        message = None if text is None else assistant_message(text)
        self._both(self.current, lambda p, sid, real: p.finalize_in_flight(sid, real(name), message, status=status))
        self.current.in_flight = None

    @precondition(lambda self: len(self.pairs) < 4)
    @rule(data=st.data())
    def fork(self, data):
        source = self.current
        leaf = self._pick(data, source)
        if leaf is None:
            return
        forks = self._both(source, lambda p, sid, real: p.create_branched_session(sid, real(leaf)))
        if forks is None:
            return
        sids = {kind: forks[kind].session_id for kind in KINDS}
        # Copied entries keep their ids; the label entries made for the fork get names now.
        made = {kind: self.providers[kind].list_entries(sids[kind]) for kind in KINDS}
        self._name_entries(made)
        self.current = self._new_pair(sids)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def providers_agree_and_events_replay(self):
        if self.current is None:
            return
        pair = self.current
        canonical = {}
        for kind in KINDS:
            provider, sid, n = self.providers[kind], pair.sids[kind], self.names[kind]
            fresh = provider.get_snapshot(sid)
            before = pair.snapshots[kind]
            events = provider.events_since(sid, before["revision"])
            assert apply_events(before, events) == fresh, f"{kind}: snapshot + events != fresh snapshot"
            pair.snapshots[kind] = fresh
            ctx = provider.build_context(sid)
            # The token estimate is kept incrementally; it must equal Pi's, computed afresh.
            assert fresh["runtimeContext"]["tokenEstimate"] == estimate_context_tokens(ctx.messages)
            if fresh["inFlight"] is None:
                entries = provider.list_entries(sid)
                pi = build_session_context(entries, fresh["leafId"])
                assert (pi.messages, pi.source_entry_ids) == (ctx.messages, ctx.source_entry_ids)
            canonical[kind] = (canon_snapshot(fresh, n), canon_context(ctx, n))
        assert canonical["file"][0] == canonical["mysql"][0], "the snapshots differ"
        assert canonical["file"][1] == canonical["mysql"][1], "the contexts differ"

    @rule(data=st.data())
    def context_at_another_entry(self, data):
        name = self._pick(data, self.current, allow_none=True)
        contexts = [
            canon_context(self.providers[k].build_context(self.current.sids[k], self._real(k, name)), self.names[k]) for k in KINDS
        ]
        assert contexts[0] == contexts[1]


MESSAGES = st.one_of(
    st.builds(lambda t: user_message(t), TEXT),
    st.builds(lambda t, stop: assistant_message(t, stop_reason=stop), TEXT, st.sampled_from(["stop", "aborted", "error", "toolUse"])),
    st.builds(lambda t: tool_result("c", "read", t), TEXT),
)


@given(messages=st.lists(MESSAGES, min_size=1, max_size=40), jumps=st.lists(st.integers(0, 6), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_index_keeps_pis_token_estimate_while_the_leaf_moves_forward(messages, jumps):
    """``SessionIndex.context_tokens`` extends the estimate by the new messages only;
    whatever the steps, it equals Pi's ``estimateContextTokens`` of the whole context."""
    index = SessionIndex()
    parent = None
    for n, message in enumerate(messages):
        entry = {"type": "message", "id": f"m{n}", "parentId": parent, "timestamp": "2025-01-01T00:00:00.000Z", "message": message}
        index.add(Record(entry["id"], parent, "message", jsonl.dumps(entry), entry))
        parent = entry["id"]
    position = 0
    for jump in jumps:
        position = min(position + jump, len(messages) - 1)
        ctx, tokens = index.context_tokens(f"m{position}")
        assert tokens == estimate_context_tokens(ctx.messages) == estimate_context_tokens(messages[: position + 1])


def test_both_providers_agree_on_random_operation_sequences(sessions_dir):
    run_state_machine_as_test(
        BothProviders,
        settings=settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            derandomize=False,
        ),
    )
