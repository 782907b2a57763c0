"""OpenAI's shapes, filled from a turn: the Responses object and its stream events, the chat
completion and its chunks, usage, and how a run's end reads in them."""

from __future__ import annotations

import time

import orjson

from runtime.openai_api import ids
from runtime.openai_api.relay import Ended, Text
from runtime.openai_api.turns import Turn


def dumps(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


# --------------------------------------------------------------------------- how a run ended


def outcome(ended: Ended) -> tuple[str, str | None]:
    """(Responses status, error message) of a followed run: ``completed``, ``incomplete`` (the
    output limit, or a question the agent asked: answered on the chat page), ``cancelled``,
    ``failed``."""
    turn_status, turn_error = ended.turn.stop() if ended.turn is not None else ("failed", None)
    if ended.status == "aborted":
        return "cancelled", ended.error or turn_error or "the run was aborted"
    if ended.status in ("failed", "lost"):
        if turn_status in ("completed", "incomplete"):
            return turn_status, None
        return "failed", ended.error or turn_error or f"the run was {ended.status}"
    if ended.status == "waiting":
        return "incomplete", None
    if turn_status == "in_progress":
        return "completed", None
    return turn_status, turn_error


def incomplete_reason(ended_status: str | None, turn: Turn | None) -> str | None:
    if ended_status == "waiting":
        return "waiting_for_answer"
    if turn is not None and turn.replies and turn.replies[-1]["message"].get("stopReason") == "length":
        return "max_output_tokens"
    return None


def usage_totals(turn: Turn | None) -> dict:
    usage = turn.usage() if turn is not None else {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    prompt = usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
    return {"prompt": prompt, "cached": usage["cacheRead"], "output": usage["output"]}


def responses_usage(turn: Turn | None) -> dict:
    u = usage_totals(turn)
    return {
        "input_tokens": u["prompt"], "input_tokens_details": {"cached_tokens": u["cached"]},
        "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u["prompt"] + u["output"],
    }  # fmt: skip


def chat_usage(turn: Turn | None) -> dict:
    u = usage_totals(turn)
    return {
        "prompt_tokens": u["prompt"], "completion_tokens": u["output"], "total_tokens": u["prompt"] + u["output"],
        "prompt_tokens_details": {"cached_tokens": u["cached"]}, "completion_tokens_details": {"reasoning_tokens": 0},
    }  # fmt: skip


# --------------------------------------------------------------------------- Responses


def text_parts(message: dict) -> list[str]:
    """A reply's non-empty text blocks, in order: its output_text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return [content] if content else []
    return [b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"]]


def output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(entry_id: str, texts: list[str], status: str = "completed") -> dict:
    return {"id": ids.message_id(entry_id), "type": "message", "status": status, "role": "assistant", "content": [output_text(t) for t in texts]}


def output_items(turn: Turn | None, status: str = "completed") -> list[dict]:
    if turn is None:
        return []
    return [message_item(r["id"], parts, status) for r in turn.replies if (parts := text_parts(r["message"]))]


def response_object(
    *,
    response_id: str,
    agent: str,
    created_at: int,
    status: str,
    turn: Turn | None = None,
    error: str | None = None,
    reason: str | None = None,
    instructions: str = "",
    sampling: dict | None = None,
    previous_response_id: str | None = None,
) -> dict:
    sampling = sampling or {}
    done = status not in ("in_progress", "queued")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": {"code": "server_error" if status == "failed" else status, "message": error} if error and status in ("failed", "cancelled") else None,
        "incomplete_details": {"reason": reason} if status == "incomplete" and reason else None,
        "instructions": instructions or None,
        "max_output_tokens": sampling.get("max_tokens"),
        "metadata": {},
        "model": agent,
        "output": output_items(turn, "completed" if status == "completed" else "incomplete") if done else [],
        "parallel_tool_calls": False,
        "previous_response_id": previous_response_id,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": sampling.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": sampling.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": responses_usage(turn) if done else None,
        "user": None,
    }


def sse(kind: str | None, data) -> bytes:
    head = f"event: {kind}\n".encode() if kind else b""
    return head + b"data: " + (data if isinstance(data, bytes) else dumps(data)) + b"\n\n"


class ResponsesStream:
    """The Responses stream events of one followed turn, numbered."""

    def __init__(self, skeleton: dict):
        self.skeleton = skeleton  # the response as created (status in_progress)
        self.seq = 0
        self.items: dict[str, int] = {}  # reply entry → output_index
        self.parts: dict[str, dict[int, str]] = {}  # reply entry → content_index → text so far
        self.open: str | None = None

    def event(self, kind: str, **fields) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(kind, data)

    def created(self) -> list[bytes]:
        return [self.event("response.created", response=self.skeleton), self.event("response.in_progress", response=self.skeleton)]

    def text(self, piece: Text) -> list[bytes]:
        out = []
        entry_id = piece.entry_id
        if entry_id not in self.items:
            if self.open is not None:
                out += self.close(self.open)
            self.items[entry_id] = len(self.items)
            self.parts[entry_id] = {}
            self.open = entry_id
            item = {**message_item(entry_id, [], "in_progress")}
            out.append(self.event("response.output_item.added", output_index=self.items[entry_id], item=item))
        parts = self.parts[entry_id]
        where = {"item_id": ids.message_id(entry_id), "output_index": self.items[entry_id], "content_index": piece.index}
        if piece.index not in parts:
            parts[piece.index] = ""
            out.append(self.event("response.content_part.added", **where, part=output_text("")))
        parts[piece.index] += piece.text
        out.append(self.event("response.output_text.delta", **where, delta=piece.text, logprobs=[]))
        return out

    def close(self, entry_id: str, status: str = "completed") -> list[bytes]:
        out = []
        parts = self.parts.get(entry_id) or {}
        index = self.items[entry_id]
        for position in sorted(parts):
            where = {"item_id": ids.message_id(entry_id), "output_index": index, "content_index": position}
            out.append(self.event("response.output_text.done", **where, text=parts[position], logprobs=[]))
            out.append(self.event("response.content_part.done", **where, part=output_text(parts[position])))
        item = message_item(entry_id, [parts[p] for p in sorted(parts)], status)
        out.append(self.event("response.output_item.done", output_index=index, item=item))
        if self.open == entry_id:
            self.open = None
        return out

    def end(self, response: dict) -> list[bytes]:
        out = []
        if self.open is not None:
            out += self.close(self.open, "completed" if response["status"] == "completed" else "incomplete")
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(response["status"], "response.failed")
        out.append(self.event(kind, response=response))
        return out


# --------------------------------------------------------------------------- Chat Completions

FINISH = {"stop": "stop", "length": "length"}


def finish_reason(turn: Turn | None) -> str:
    if turn is None or not turn.replies:
        return "stop"
    return FINISH.get(turn.replies[-1]["message"].get("stopReason"), "stop")


def chat_completion(*, completion_id: str, agent: str, turn: Turn, created: int) -> dict:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": agent,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": turn.text(), "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": finish_reason(turn),
            }
        ],
        "usage": chat_usage(turn),
    }


class ChatStream:
    """The chunks of one followed turn."""

    def __init__(self, *, agent: str, include_usage: bool):
        self.agent, self.include_usage = agent, include_usage
        self.id: str | None = None
        self.created = int(time.time())
        self.sent_text = False

    def chunk(self, delta: dict, finish: str | None = None, *, usage=None, choices=True) -> bytes:
        data = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.agent, "system_fingerprint": None}
        data["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []
        if self.include_usage:
            data["usage"] = usage
        return sse(None, data)

    def opened(self, completion_id: str) -> list[bytes]:
        self.id = completion_id
        return [self.chunk({"role": "assistant", "content": ""})]

    def text(self, piece: Text) -> list[bytes]:
        text = piece.text
        if piece.first_of_reply and self.sent_text:
            text = "\n\n" + text  # the turn's replies, joined as turn_text joins them
        self.sent_text = True
        return [self.chunk({"content": text})]

    def end(self, turn: Turn | None) -> list[bytes]:
        out = [self.chunk({}, finish_reason(turn))]
        if self.include_usage:
            out.append(self.chunk({}, usage=chat_usage(turn), choices=False))
        out.append(b"data: [DONE]\n\n")
        return out


def stream_error(message: str, code: str) -> bytes:
    """An error in the middle of a stream (OpenAI's SDKs raise it as an ``APIError``)."""
    return sse(None, {"error": {"message": message, "type": "server_error", "param": None, "code": code}})

