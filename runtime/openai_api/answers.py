"""The answers: a stream of events, or one JSON body written when the turn has ended. Both
give the request's thread back before they wait (``frees_thread``: infra/http_threads.py)."""

from __future__ import annotations

import contextlib
import time
import weakref

from django.http import HttpResponse, StreamingHttpResponse

from runtime.openai_api import ids, shapes
from runtime.openai_api.conversation import index_conversation
from runtime.openai_api.errors import error_body
from runtime.openai_api.relay import Ended, Follower, Opened, Text, db
from runtime.openai_api.start import SESSION_HEADER, Started


class StreamedAnswer(StreamingHttpResponse):
    """Server-sent events from an async generator, which is closed when the client goes away
    (``aclose``: the follower aborts the run)."""

    frees_thread = True

    def __init__(self, body, session_id: str):
        super().__init__(body, content_type="text/event-stream")
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"  # proxies pass each event on at once
        self[SESSION_HEADER] = session_id

    def __aiter__(self):
        return self._iterator  # the generator itself, so Django's aclosing() closes it


class DeferredAnswer(HttpResponse):
    """A JSON body (and status) produced on the event loop once the turn has ended."""

    frees_thread = True

    def __init__(self, produce, session_id: str):
        super().__init__(content_type="application/json")
        self._produce = produce
        self[SESSION_HEADER] = session_id

    async def prepare(self) -> None:
        status, body = await self._produce()
        self.status_code = status
        self.content = shapes.dumps(body)
        self["Content-Length"] = str(len(self.content))


@contextlib.asynccontextmanager
async def following(follower: Follower):
    """The follower's events, closed however the caller ends (a client gone: the run is aborted)."""
    events = follower.events()
    try:
        yield events
    finally:
        await events.aclose()


# --------------------------------------------------------------------------- Responses


def _response(started: Started, ended: Ended, created_at: int) -> dict:
    status, error = shapes.outcome(ended)
    turn = ended.turn
    if turn is not None and turn.replies:
        response_id = ids.response_id(turn.session_id, turn.last_id)
    else:
        response_id = ids.run_response_id(started.run.run_id)
    if turn is not None and turn.created_at():
        created_at = turn.created_at()  # as GET /v1/responses/{id} says it
    return shapes.response_object(
        response_id=response_id, agent=started.agent, created_at=created_at, status=status, turn=turn, error=error,
        reason=shapes.incomplete_reason(ended.status, turn), instructions=started.call.instructions,
        sampling=started.call.sampling, previous_response_id=started.previous_response_id,
    )  # fmt: skip


def _guarded(answer: HttpResponse, follower: Follower) -> HttpResponse:
    """An answer that is never sent (its client left first) does not leave its run queued."""
    weakref.finalize(answer, follower.unfollowed)
    return answer


def response_answer(started: Started, user) -> HttpResponse:
    created_at = int(time.time())
    follower = Follower(started, user)
    session_id = started.session.session_id

    def skeleton(response_id: str) -> dict:
        return shapes.response_object(
            response_id=response_id, agent=started.agent, created_at=created_at, status="in_progress",
            instructions=started.call.instructions, sampling=started.call.sampling,
            previous_response_id=started.previous_response_id,
        )  # fmt: skip

    if not started.call.stream:

        async def produce():
            ended = None
            async with following(follower) as events:
                async for event in events:
                    if isinstance(event, Ended):
                        ended = event
            return 200, _response(started, ended, created_at)

        return _guarded(DeferredAnswer(produce, session_id), follower)

    async def body():
        stream = None
        async with following(follower) as events:
            async for event in events:
                if isinstance(event, Opened):
                    # The turn's first reply names the response until its last is known (the
                    # completed event's id): both ids name this response (docs/api.md).
                    stream = shapes.ResponsesStream(skeleton(ids.response_id(session_id, event.entry_id)))
                    for chunk in stream.created():
                        yield chunk
                elif isinstance(event, Text):
                    for chunk in stream.text(event):
                        yield chunk
                elif isinstance(event, Ended):
                    final = _response(started, event, created_at)
                    if stream is None:
                        stream = shapes.ResponsesStream(skeleton(final["id"]))
                        for chunk in stream.created():
                            yield chunk
                    for chunk in stream.end(final):
                        yield chunk

    return _guarded(StreamedAnswer(body(), session_id), follower)


# --------------------------------------------------------------------------- Chat Completions


def _chat_failure(ended: Ended) -> tuple[int, str, str] | None:
    """(status, message, code) when the turn did not end with an answer."""
    status, error = shapes.outcome(ended)
    if status == "cancelled":
        return 409, error or "the run was aborted", "run_aborted"
    if status == "failed":
        return 502, error or "the run failed", "run_failed"
    return None


async def _remember(ended: Ended) -> None:
    """The turn's conversation, for the next request that resends it (before it is answered:
    a client may send the next message as soon as it has this one)."""
    turn = ended.turn
    if turn is not None and turn.replies:
        await db(index_conversation, turn.session_id, turn.last_id)


def chat_answer(started: Started, user) -> HttpResponse:
    follower = Follower(started, user)
    session_id = started.session.session_id
    call = started.call

    if not call.stream:

        async def produce():
            ended = None
            async with following(follower) as events:
                async for event in events:
                    if isinstance(event, Ended):
                        ended = event
            await _remember(ended)
            failure = _chat_failure(ended)
            if failure is not None:
                status, message, code = failure
                return status, error_body(status, message, code=code)
            turn = ended.turn
            return 200, shapes.chat_completion(
                completion_id=ids.chat_id(session_id, turn.first_id), agent=started.agent, turn=turn, created=turn.created_at() or int(time.time())
            )

        return _guarded(DeferredAnswer(produce, session_id), follower)

    async def body():
        stream = shapes.ChatStream(agent=started.agent, include_usage=call.include_usage)
        async with following(follower) as events:
            async for event in events:
                if isinstance(event, Opened):
                    for chunk in stream.opened(ids.chat_id(session_id, event.entry_id)):
                        yield chunk
                elif isinstance(event, Text):
                    for chunk in stream.text(event):
                        yield chunk
                elif isinstance(event, Ended):
                    await _remember(event)
                    failure = _chat_failure(event)
                    if failure is not None:
                        yield shapes.stream_error(failure[1], failure[2])
                    else:
                        if stream.id is None:
                            stream.id = ids.chat_id(session_id, event.turn.first_id)
                        for chunk in stream.end(event.turn):
                            yield chunk

    return _guarded(StreamedAnswer(body(), session_id), follower)
