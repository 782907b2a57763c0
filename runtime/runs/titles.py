"""Session titles written by a model after the first answer (docs/api.md).

When a run's answer is stored and the session has no title yet, a short title is asked
of the agent's model, or of ``NETA_TITLE_MODEL`` (a cheap one; ``off`` turns this off),
and written the way a rename writes it: a ``session_info`` entry (Pi's ``/name``). The
scripted model writes a deterministic one (the first words of the first prompt), so
tests and the embedded default see titles without a network. The title is written after
the answer was finalized and streamed, while the run is still running (nothing else
writes to the tree then); a failure is logged, never fatal to the run.
"""

from __future__ import annotations

import logging
import re
import unicodedata

from django.conf import settings
from django.utils import timezone

from runtime import llm
from runtime.agents.specs import model_spec
from runtime.models import LlmProviderKind, ModelConfig
from runtime.runs import traces
from sessions_tree.ids import now_ms

logger = logging.getLogger(__name__)

TITLE_SYSTEM_PROMPT = (
    "You name conversations. Reply with a title of at most six words for the conversation below: "
    "no quotes, no final punctuation, no preamble."
)
MAX_TITLE_CHARS = 80
SOURCE_CHARS = 2000  # of the prompt and of the answer, sent to the title model


def title_model(agent) -> ModelConfig | None:
    """The model that writes titles for ``agent``'s sessions (None: titles are off)."""
    wanted = settings.NETA_TITLE_MODEL.strip()
    if wanted == "off":
        return None
    if not wanted:
        return agent.model
    model = ModelConfig.objects.filter(name=wanted, enabled=True).first()
    if model is None:
        logger.warning("NETA_TITLE_MODEL names no enabled model %r: using the agent's", wanted)
        return agent.model
    return model


SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|[。！？]")
TITLE_WORDS = 6
WIDE_TITLE_CHARS = 16  # a title in a language written without spaces (Chinese, Japanese)


def scripted_title(prompt: str) -> str:
    """The scripted model's title (and the shape of a fallback title): the prompt's first
    sentence when it has at most six words, else its first six words — never a phrase cut
    after a sentence's end ("What is in my workspace? Give"). Text without spaces is cut
    at a character boundary."""
    line = re.sub(r"\s+", " ", prompt).strip()
    end = SENTENCE_END.search(line)
    if end:
        line = line[: end.end()]
    words = line.split(" ")
    if len(words) == 1 and len(line) > WIDE_TITLE_CHARS:
        return clean_title(cut_chars(line, WIDE_TITLE_CHARS))
    return clean_title(" ".join(words[:TITLE_WORDS]))


def cut_chars(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters without splitting a character and the marks
    that combine with it (a base letter keeps its accents; a surrogate never comes alone)."""
    if len(text) <= limit:
        return text
    cut = limit
    while cut > 0 and (unicodedata.combining(text[cut]) or text[cut] in "\u200d\ufe0f"):
        cut -= 1
    return text[:cut] + "…"


def clean_title(text: str) -> str:
    """A model's reply as a title: one line, no quotes or final punctuation, bounded."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    line = line.removeprefix("Title:").strip().strip("\"'`*#").strip().rstrip(".!?:;,").strip()
    if len(line) > MAX_TITLE_CHARS:
        room = line[: MAX_TITLE_CHARS - 1]
        space = room.rfind(" ")
        line = (room[:space] if space > MAX_TITLE_CHARS // 2 else cut_chars(line, MAX_TITLE_CHARS - 1)[:-1]).rstrip(" ,;:-") + "…"
    return line[:1].upper() + line[1:]


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def first_exchange(path: list[dict]) -> tuple[str, str] | None:
    """The first user prompt and the first finished answer on ``path`` (None: not there
    yet, or the session was named already on this path)."""
    prompt = answer = None
    for entry in path:
        if entry.get("type") == "session_info":
            return None
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        if prompt is None and message.get("role") == "user":
            prompt = _text(message)
        elif prompt is not None and message.get("role") == "assistant" and message.get("stopReason") in ("stop", "toolUse", "length"):
            answer = _text(message)
            if answer.strip():
                break
            answer = None
    if not prompt or not prompt.strip() or answer is None:
        return None
    return prompt, answer


def write_title(model: ModelConfig, prompt: str, answer: str, *, cancel=None, run=None, session_id: str = "") -> str:
    """A title for the exchange, from ``model`` ("" when it gave none); the call is recorded
    in ``run``'s trace (runs/traces.py)."""
    if model.provider_kind == LlmProviderKind.SCRIPTED:
        return scripted_title(prompt)
    request = llm.LlmRequest(
        system_prompt=TITLE_SYSTEM_PROMPT,
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": f"User: {prompt[:SOURCE_CHARS]}\n\nAssistant: {answer[:SOURCE_CHARS]}"}],
                "timestamp": now_ms(),
            }
        ],
        tools=[],
        thinking_level="off",
        max_tokens=min(64, model.max_output_tokens),
    )
    spec, started = model_spec(model), timezone.now()
    final = llm.complete(spec, request, cancel=cancel)
    traces.record_direct(run=run, session_id=session_id, purpose="title", name=model.name, spec=spec, request=request, final=final or {}, started=started)
    if final is None or final.get("stopReason") in ("error", "aborted"):
        raise RuntimeError((final or {}).get("errorMessage") or "the title model gave no answer")
    return clean_title(_text(final))


def maybe_auto_title(turn) -> dict | None:
    """Name the session after its first answer, if it has no name. Returns the
    ``session_info`` entry written, or None. Never raises: a failure is logged."""
    try:
        model = title_model(turn.agent)
        if model is None:
            return None
        answering = getattr(turn, "answering", None)
        if answering is not None and model.pk == turn.model.pk:
            model = answering.config  # the run failed over (runs/failover.py): the model that answers now
        if turn.meta is not None and turn.meta.title:
            return None  # the turn's copy of the row has one: no read
        meta = turn.provider.get_session(turn.session_id)  # a rename may have come meanwhile
        if meta.title:
            return None
        exchange = first_exchange(turn.provider.get_active_path(turn.session_id, meta=meta))
        if exchange is None:
            return None
        title = write_title(model, *exchange, cancel=turn.control.cancel, run=turn.run, session_id=turn.session_id)
        if not title:
            return None
        entry = turn.provider.append_session_info(turn.session_id, name=title, meta=meta)
        turn.meta = meta  # written on this copy, which the write brought up to date
        return entry
    except Exception:
        logger.exception("run %s: writing the session title failed", turn.run.run_id)
        return None
