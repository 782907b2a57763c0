"""The conversation a Chat Completions client holds, found in the tree.

A client sends its whole conversation with every request. Seen from the client, a session's
path is a list of messages: each user message, and for each turn one assistant message whose
text is the turn's assistant texts joined by a blank line (the tool calls and results between
them stay on the server). Each such message is a *node*: a user message entry, or the entry
that ends an assistant turn (an assistant message that did not stop for a tool).

A node's digest chains the digests above it (SHA-256 of the parent's digest and the node's
role, text and images, cut to 16 bytes), so two conversations share a digest exactly when
one is a prefix of the other up to that node. The request's messages get the same digests;
the deepest node whose digest is among them is where the client's history leaves the tree
(``ConversationNode`` rows, one indexed lookup among the caller's sessions; a pinned session
is searched in memory, every branch).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from runtime.models import ConversationNode
from runtime.openai_api.inputs import Message
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session

# A match that continues a session must hold an assistant answer: a first user message alone
# is how every new conversation starts ("hi"), and says nothing about which session it is.
MIN_DEPTH = 2


@dataclass(frozen=True)
class Node:
    role: str  # user | assistant
    entry_id: str
    depth: int
    digest: str


def message_text(message: dict) -> str:
    """An assistant message's text blocks, joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text") or "" for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def turn_text(messages: Iterable[dict]) -> str:
    """A turn's assistant messages as the one message a Chat Completions client gets."""
    return "\n\n".join(t for t in (message_text(m) for m in messages) if t)


def user_parts(message: dict) -> tuple[str, list[str]]:
    """A stored user message's text (text blocks joined by newlines) and its images' base64."""
    content = message.get("content")
    if isinstance(content, str):
        return content, []
    blocks = [b for b in content or [] if isinstance(b, dict)]
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    return text, [b["data"] for b in blocks if b.get("type") == "image" and isinstance(b.get("data"), str)]


def _key(role: str, text: str, images: Iterable[str]) -> bytes:
    pictures = ",".join(hashlib.sha256(i.encode("ascii", "replace")).hexdigest() for i in images)
    return f"{role}\x1f{text.strip()}\x1f{pictures}".encode("utf-8", "surrogatepass")


def _chain(parent: str, key: bytes) -> str:
    return hashlib.sha256(bytes.fromhex(parent) + key).digest()[:16].hex()


ROOT_DIGEST = ""


def request_digests(messages: list[Message]) -> list[str]:
    """The digest of each of the client's messages (depth i+1 for messages[i])."""
    out, digest = [], ROOT_DIGEST
    for message in messages:
        digest = _chain(digest, _key(message.role, message.text, [i["data"] for i in message.images]))
        out.append(digest)
    return out


class _Walker:
    """The conversation state after an entry: the digest and depth of the nodes above, and the
    assistant texts of the turn under way. ``step`` gives the state after a child entry and
    the node that entry is, if it is one."""

    __slots__ = ("digest", "depth", "turn")

    def __init__(self, digest: str = ROOT_DIGEST, depth: int = 0, turn: tuple[str, ...] | None = None):
        self.digest, self.depth, self.turn = digest, depth, turn

    def step(self, entry: dict) -> tuple[_Walker, Node | None]:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict):
            return self, None
        role = message.get("role")
        if role == "user":
            digest, depth = self.digest, self.depth
            if self.turn is not None:  # the turn before it ends here
                digest, depth = _chain(digest, _key("assistant", "\n\n".join(t for t in self.turn if t), [])), depth + 1
            text, images = user_parts(message)
            digest, depth = _chain(digest, _key("user", text, images)), depth + 1
            return _Walker(digest, depth, None), Node("user", entry.get("id"), depth, digest)
        if role == "assistant":
            turn = (*(self.turn or ()), message_text(message))
            state = _Walker(self.digest, self.depth, turn)
            if message.get("stopReason") == "toolUse":
                return state, None  # the turn goes on (its tools' results, then the next reply)
            digest = _chain(self.digest, _key("assistant", "\n\n".join(t for t in turn if t), []))
            return state, Node("assistant", entry.get("id"), self.depth + 1, digest)
        return self, None  # tool results, custom messages: not part of what the client holds


def path_nodes(path: list[dict]) -> list[Node]:
    """The nodes of a root→leaf path."""
    state, nodes = _Walker(), []
    for entry in path:
        state, node = state.step(entry)
        if node is not None:
            nodes.append(node)
    return nodes


def tree_nodes(entries: list[dict]) -> dict[str, Node]:
    """Every node of a session (all branches), by digest; entries in stored order (a parent
    before its children). Where two nodes share a digest the later one wins."""
    states: dict[str, _Walker] = {}
    found: dict[str, Node] = {}
    for entry in entries:
        parent = entry.get("parentId")
        state = states.get(parent) if parent is not None else None
        state, node = (state or _Walker()).step(entry)
        states[entry.get("id")] = state
        if node is not None:
            found[node.digest] = node
    return found


@dataclass(frozen=True)
class Match:
    session_id: str
    entry_id: str | None  # None: nothing of the conversation is in the session
    depth: int


def find_in_sessions(*, owner_id: int, agent: str, digests: list[str]) -> Match | None:
    """The deepest node (at least ``MIN_DEPTH``) of the owner's sessions of ``agent`` whose
    conversation is a prefix of the client's; of equal ones, the latest written."""
    wanted = digests[MIN_DEPTH - 1 :]
    if not wanted:
        return None
    row = (
        ConversationNode.objects.filter(owner_id=owner_id, digest__in=wanted, session__agent=agent)
        .order_by("-depth", "-pk")
        .values_list("session__session_id", "entry_id", "depth", "digest")
        .first()
    )
    if row is None or digests[row[2] - 1] != row[3]:
        return None
    return Match(session_id=row[0], entry_id=row[1], depth=row[2])


def find_in_session(session_id: str, digests: list[str]) -> Match:
    """The deepest node of one session (any branch) whose conversation is a prefix of the client's."""
    provider = provider_for_session(session_id)
    index = provider.index_for(session_id)
    nodes = tree_nodes([record.entry for record in index.by_id.values()])
    for depth in range(len(digests), 0, -1):
        node = nodes.get(digests[depth - 1])
        if node is not None and node.depth == depth:
            return Match(session_id=session_id, entry_id=node.entry_id, depth=depth)
    return Match(session_id=session_id, entry_id=None, depth=0)


def conversation_start(session_id: str) -> str | None:
    """Where a conversation that shares nothing with a session's starts in it: before its
    first message (after the header entries a new session opens with: model, thinking level),
    or at its leaf when it has no message yet."""
    provider = provider_for_session(session_id)
    index = provider.index_for(session_id)
    for record in index.by_id.values():
        if record.type == "message":
            return record.parent_id
    return provider.get_session(session_id).leaf_entry_id


def index_conversation(session_id: str, last_entry_id: str) -> int:
    """Record the nodes of the path root→``last_entry_id`` that are not recorded yet (after a
    Chat Completions turn); returns how many were new."""
    meta = AgentSession.objects.filter(session_id=session_id).only("pk", "user_id").first()
    if meta is None:
        return 0
    path = provider_for_session(session_id).get_active_path(session_id, last_entry_id)
    nodes = path_nodes(path)
    if not nodes:
        return 0
    with transaction.atomic():
        known = set(ConversationNode.objects.filter(session_id=meta.pk, entry_id__in=[n.entry_id for n in nodes]).values_list("entry_id", flat=True))
        new = [
            ConversationNode(session_id=meta.pk, owner_id=meta.user_id, entry_id=n.entry_id, depth=n.depth, digest=n.digest)
            for n in nodes
            if n.entry_id not in known
        ]
        ConversationNode.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)
