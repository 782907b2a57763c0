"""Following a run for an OpenAI request, on the event loop: the text of its replies as it
streams, then the turn as the tree holds it.

The follower listens as a websocket does (docs/realtime.md): it joins the session's group on
the channel layer *before* the run is handed to its backend, applies tree events strictly in
revision order (a gap, or an event sent by reference, is filled from the event log) and takes
the replies' text from the streaming deltas. The layer may lose messages: a delta that does
not join what came before (its ``offset``) waits for the next checkpoint or the final entry,
which the tree events bring; after a second without a message the run's state and the
session's revision are read, so a lost ``run_state`` costs at most that second. Text is
handed out in order and only once: a reply's text after the replies before it are final,
a block's after the blocks before it are complete.

Its database reads run on a small pool of their own (``NETA_HTTP_THREADS`` stay free for
requests: infra/http_threads.py). A request whose client goes away aborts the run as the
chat page's Abort does (``run_abort`` as the caller).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from channels.layers import get_channel_layer
from django.db import close_old_connections

from infra import db_threads
from runtime.models import AgentRun
from runtime.openai_api.start import Started
from runtime.openai_api.turns import Turn, turn_of
from runtime.realtime.groups import group_name
from runtime.realtime.messages import STREAM_MESSAGE, TREE_MESSAGE
from runtime.realtime.publisher import event_publisher
from runtime.runs.backends import submit_run
from runtime.runs.prompts import run_abort
from sessions_tree.errors import ResyncNeeded, SessionNotFound
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session

logger = logging.getLogger(__name__)

IDLE_SECONDS = 1.0  # without a layer message for this long, the run's state is read
TERMINAL = ("completed", "failed", "aborted", "lost")
ENDED = (*TERMINAL, "waiting")  # waiting: parked on an ask_user question (answered on the page)
DB_THREADS = 4

_pool = None


def _executor():
    global _pool
    if _pool is None:
        _pool = db_threads.executor("neta-openai", DB_THREADS)
    return _pool


def _job(fn, *args):
    close_old_connections()  # a kept connection that broke is replaced (infra/db_threads.py)
    return fn(*args)


async def db(fn, *args):
    """``fn(*args)`` on the follower's database threads."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), _job, fn, *args)


# --------------------------------------------------------------------------- what comes out


@dataclass
class Text:
    entry_id: str
    index: int  # the block's position among the reply's text blocks
    text: str
    first_of_reply: bool  # the reply's first text


@dataclass
class Opened:
    entry_id: str  # the turn's first reply (the run has begun writing it)


@dataclass
class Ended:
    status: str  # the run's status (completed, failed, aborted, lost, waiting); "ended" when the turn
    # ended before the run did (a message queued meanwhile starts the next turn)
    error: str
    turn: Turn | None


# --------------------------------------------------------------------------- reads (on the pool)


def _events_since(session_id: str, revision: int) -> list[dict] | None:
    try:
        return provider_for_session(session_id).events_since(session_id, revision)
    except (ResyncNeeded, SessionNotFound):
        return None


def _run_and_revision(run_pk: int, session_id: str, session_pk: int) -> tuple[str | None, str, int]:
    run = AgentRun.objects.filter(pk=run_pk).values_list("status", "error").first()
    revision = AgentSession.objects.filter(pk=session_pk, session_id=session_id).values_list("revision", flat=True).first()
    status, error = run if run is not None else (None, "")
    return status, error or "", revision if revision is not None else -1


def _submit(run: AgentRun) -> None:
    submit_run(run, recorded=True)


def _abort(session_id: str, run_pk: int, user) -> None:
    run = AgentRun.objects.filter(pk=run_pk).first()
    if run is not None and run.is_active:
        run_abort(run=run, actor=user)


def _turn(session_id: str, entry_id: str) -> Turn | None:
    try:
        return turn_of(session_id, entry_id)
    except SessionNotFound:
        return None


def _replies_from_store(session_id: str, prompt_id: str | None) -> str | None:
    """The first reply of the turn that answers ``prompt_id`` as the store holds it (a fallback
    when the event log no longer reaches back): the prompt's last assistant child."""
    if prompt_id is None:
        return None
    index = provider_for_session(session_id).index_for(session_id)
    found = None
    for record in index.by_id.values():
        if record.parent_id == prompt_id and record.type == "message" and (record.entry.get("message") or {}).get("role") == "assistant":
            found = record.id
    return found


# --------------------------------------------------------------------------- the follower


class _Blocks:
    """One reply's text blocks: what is known of each (always a prefix of its final text) and
    how much of it went out."""

    def __init__(self):
        self.known: dict[int, str] = {}  # content index → text known
        self.sent: dict[int, int] = {}
        self.closed: set[int] = set()  # blocks known to be complete
        self.final = False
        self.any_sent = False

    def learn(self, index: int, text: str) -> None:
        if len(text) > len(self.known.get(index, "")):
            self.known[index] = text

    def delta(self, index: int, offset, text: str) -> None:
        known = self.known.get(index, "")
        if not isinstance(offset, int) or isinstance(offset, bool):
            offset = len(known)  # a delta that does not say where it goes follows what came before
        if offset <= len(known):
            self.learn(index, known[:offset] + text)
        # else: a delta was lost; the next checkpoint or the final entry brings the text

    def snapshot(self, message: dict, final: bool) -> None:
        """A checkpoint (or the final message): every text block but the last is complete."""
        content = [b for b in (message.get("content") or []) if isinstance(b, dict)]
        for i, block in enumerate(content):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                if final or i < len(content) - 1:
                    self.known[i] = block["text"]  # complete: authoritative
                    self.closed.add(i)
                else:
                    self.learn(i, block["text"])
            elif i < len(content) - 1 or final:
                self.closed.add(i)
        self.final = self.final or final

    def take(self) -> list[tuple[int, str]]:
        """Text not yet handed out, in block order, up to the first block that may still grow."""
        out = []
        for position, index in enumerate(sorted(self.known)):
            text, sent = self.known[index], self.sent.get(index, 0)
            if len(text) > sent:
                out.append((position, text[sent:]))
                self.sent[index] = len(text)
            if not (self.final or index in self.closed):
                break
        return out


class Follower:
    """Follows ``started``'s run; ``events()`` yields ``Opened``, ``Text`` and one ``Ended``."""

    def __init__(self, started: Started, user):
        self.started = started
        self.user = user
        self.session_id = started.session.session_id
        self.session_pk = started.session.pk
        self.run_id = str(started.run.run_id)
        self.revision = started.revision
        self.prompt_id = started.prompt_entry_id  # known for a regenerated answer
        self.replies: list[str] = []
        self.blocks: dict[str, _Blocks] = {}
        self.turn_over = False  # a user message followed the turn (queued on the run meanwhile)
        self.status: str | None = None
        self.error = ""
        self.opened = False
        self.following = False  # events() has begun: from here on it submits or aborts the run
        self.submitted = False
        self.finished = False
        self.layer = None
        self.channel = None
        self.inbox: asyncio.Queue | None = None
        self.reader: asyncio.Task | None = None

    # ------------------------------------------------------------------ the loop

    async def events(self) -> AsyncIterator:
        self.following = True
        try:
            try:
                await self._listen()
            except Exception:  # the layer is away: the idle reads follow the run alone
                logger.warning("OpenAI follower of %s could not join its group; following by reads", self.session_id, exc_info=True)
                await self._close()
                self.layer = self.channel = self.inbox = self.reader = None
            await db(_submit, self.started.run)
            self.submitted = True
            while True:
                message = await self._next()
                if message is None:
                    await self._idle()
                else:
                    await self._message(message)
                for event in self._drain():
                    yield event
                if self.status in ENDED or self.turn_over:
                    break
            ended = await self._end()
            self.finished = True  # from here on the run is not this request's to abort
            for event in self._drain():
                yield event
            yield ended
        except BaseException:  # the client went away, or following failed: the run is not left behind
            if not self.finished:
                await self._abandon()
            raise
        finally:
            await self._close()

    async def _listen(self) -> None:
        self.layer = get_channel_layer()
        if self.layer is None:
            return
        event_publisher.bind_server_loop(asyncio.get_running_loop())  # the in-process layer delivers on this loop
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(group_name(self.session_id), self.channel)
        self.inbox = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        """Layer messages into the inbox (a receive is never cancelled mid-way but at the end)."""
        failures = 0
        while True:
            try:
                self.inbox.put_nowait(await self.layer.receive(self.channel))
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:  # the layer is away: the idle reads carry the follower meanwhile
                failures += 1
                if failures == 1:
                    logger.warning("OpenAI follower of %s could not read its channel", self.session_id, exc_info=True)
                await asyncio.sleep(min(1.0, 0.1 * failures))

    async def _next(self) -> dict | None:
        if self.inbox is None:
            await asyncio.sleep(IDLE_SECONDS)
            return None
        try:
            return await asyncio.wait_for(self.inbox.get(), IDLE_SECONDS)
        except TimeoutError:
            return None

    async def _close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.layer is not None and self.channel is not None:
            try:
                await self.layer.group_discard(group_name(self.session_id), self.channel)
            except Exception:
                logger.debug("group_discard failed", exc_info=True)

    def unfollowed(self) -> None:
        """The answer was dropped before it began (its client left before the response was
        sent): the run, recorded but never handed to its backend, is aborted rather than left
        queued (``weakref.finalize`` on the answer calls this)."""
        if not self.following:
            _executor().submit(_job, _abort, self.session_id, self.started.run.pk, self.user)

    async def _abandon(self) -> None:
        """The client went away: abort the run (or never start it), as the caller."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_executor(), _job, _abort, self.session_id, self.started.run.pk, self.user)
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("could not abort run %s after its client went away", self.run_id)

    # ------------------------------------------------------------------ input

    async def _message(self, message: dict) -> None:
        if message.get("sessionKey") != self.session_pk:
            return
        kind = message.get("type")
        if kind == TREE_MESSAGE:
            revision = message.get("revision")
            if not isinstance(revision, int) or revision <= self.revision:
                return
            event = message.get("event")
            if revision == self.revision + 1 and event is not None:
                self._tree(event)
            else:
                await self._fill()
        elif kind == STREAM_MESSAGE:
            event = message.get("event") or {}
            await self._stream(event)

    async def _stream(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "run_state" and event.get("runId") == self.run_id:
            if event.get("state") in ENDED:
                await self._fill()  # the run's last tree events come before its end
                self.status, self.error = event.get("state"), event.get("error") or ""
        elif kind == "assistant_stream_start" and event.get("runId") == self.run_id:
            if event.get("entryId") not in self.blocks:
                await self._fill()
        elif kind == "assistant_stream_delta" and event.get("kind") == "text":
            entry_id = event.get("entryId")
            if entry_id not in self.blocks:
                await self._fill()  # its opening was lost
            blocks = self.blocks.get(entry_id)
            if blocks is not None and not blocks.final and isinstance(event.get("contentIndex"), int):
                blocks.delta(event["contentIndex"], event.get("offset"), event.get("delta") or "")

    async def _idle(self) -> None:
        status, error, revision = await db(_run_and_revision, self.started.run.pk, self.session_id, self.session_pk)
        if revision > self.revision:
            await self._fill()
        if status is None or revision < 0:
            self.status, self.error = "failed", "the session or its run is gone"
        elif status in ENDED:
            await self._fill()
            self.status, self.error = status, error

    async def _fill(self) -> None:
        events = await db(_events_since, self.session_id, self.revision)
        if events is None:  # the log no longer reaches back: the end reads the store
            self.revision = (await db(_run_and_revision, self.started.run.pk, self.session_id, self.session_pk))[2]
            if self.prompt_id is not None and not self.replies:
                first = await db(_replies_from_store, self.session_id, self.prompt_id)
                if first is not None:
                    self.replies.append(first)
                    self.blocks[first] = _Blocks()
            return
        for event in events:
            if event.get("revision", 0) > self.revision:
                self._tree(event)

    def _tree(self, event: dict) -> None:
        self.revision = event.get("revision", self.revision)
        kind = event.get("type")
        entry = event.get("entry")
        if kind not in ("session_entry_added", "session_entry_updated") or not isinstance(entry, dict):
            return
        message = entry.get("message") if entry.get("type") == "message" else None
        role = message.get("role") if isinstance(message, dict) else None
        entry_id = entry.get("id")
        if kind == "session_entry_added":
            if role == "user":
                if self.prompt_id is None:
                    self.prompt_id = entry_id
                elif self.replies:
                    self.turn_over = True  # the next turn (a message queued meanwhile) begins
                return
            if role == "assistant" and self.prompt_id is not None and not self.turn_over and entry_id not in self.blocks:
                self.replies.append(entry_id)
                self.blocks[entry_id] = _Blocks()
            if entry_id in self.blocks and not event.get("inFlight"):
                self.blocks[entry_id].snapshot(message, final=True)  # stored at once, not streamed
            elif entry_id in self.blocks:
                self.blocks[entry_id].snapshot(message, final=False)
        elif entry_id in self.blocks:
            self.blocks[entry_id].snapshot(message or {}, final=not event.get("inFlight"))

    # ------------------------------------------------------------------ output

    def _drain(self) -> list:
        out = []
        if self.replies and not self.opened:
            self.opened = True
            out.append(Opened(self.replies[0]))
        for entry_id in self.replies:
            blocks = self.blocks[entry_id]
            for position, text in blocks.take():
                out.append(Text(entry_id, position, text, first_of_reply=not blocks.any_sent))
                blocks.any_sent = True
            if not blocks.final:
                break  # later replies wait for this one to be complete
        return out

    async def _end(self) -> Ended:
        if self.status not in ENDED and not self.turn_over:
            self.status = "failed"
        turn = await db(_turn, self.session_id, self.replies[-1]) if self.replies else None
        if turn is not None:
            # What the stream may still owe (a delta lost at the very end): from the stored replies.
            for entry in turn.replies:
                blocks = self.blocks.setdefault(entry["id"], _Blocks())
                if entry["id"] not in self.replies:
                    self.replies.append(entry["id"])
                blocks.snapshot(entry["message"], final=True)
        status = "ended" if self.turn_over and self.status not in ENDED else self.status
        return Ended(status=status, error=self.error, turn=turn)
