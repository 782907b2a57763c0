"""What Pi derives from a session: the object ``pi-oracle/oracle context`` prints.

:func:`session_view` builds, from a (migrated) header and its entries, exactly
the fields of ``../shared/pi-oracle/lib/context.mjs`` in the same order, so that
``dumps_pretty(session_view(...))`` is byte-identical to the oracle's output for
the same file and leaf. See ``pi-oracle/README.md`` for the field list.

Difference from the oracle: none in output; where Pi would loop forever (a parent
cycle on the leaf path) both refuse, here with
:class:`~sessions_tree.path.CycleError`.
"""

from __future__ import annotations

from sessions_tree.context import SessionContext, context_from_path, convert_to_llm
from sessions_tree.jsonl import UNDEFINED, js_to_string
from sessions_tree.path import (
    MissingLeafError,
    id_key,
    index_by_id,
    js_truthy,
    walk_from_entry,
)
from sessions_tree.tree import get_tree, label_state, session_name

__all__ = ["DEFAULT", "session_view"]


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()  # Pi's leaf after loading a file: the last entry line


def session_view(header: dict, entries: list[dict], leaf=DEFAULT, *, file_version=None, canonical_ids: bool = False) -> dict:
    """The oracle's ``context`` object for ``header``/``entries`` at ``leaf``.

    ``leaf``: :data:`DEFAULT` (the last entry, Pi's default), None (``@root``:
    Pi's ``resetLeaf()``), or an entry id (with ``canonical_ids``, ``eN`` names
    are accepted too); an unknown id raises MissingLeafError ("Entry X not
    found", Pi's ``branch()`` message). ``file_version`` is the header
    ``version`` as written in the file (see ``ParsedSession.file_version``).
    Raises CycleError for a parent cycle on the leaf's path.
    """
    if not isinstance(header, dict):
        raise TypeError("session_view needs the session header dict")

    # Canonical ids: e1, e2, ... in order of first appearance (the id-less count too).
    canon: dict = {}
    first_ids: list = []
    for entry in entries:
        i = entry.get("id", UNDEFINED)
        key = i if type(i) is str else id_key(i)
        if key not in canon:
            canon[key] = f"e{len(canon) + 1}"
            first_ids.append(i)

    def cid(value):
        if canonical_ids and type(value) is str and value in canon:
            return canon[value]
        return value

    index = index_by_id(entries)
    if leaf is DEFAULT:
        leaf_id = entries[-1].get("id", UNDEFINED) if entries else None
    elif leaf is None:
        leaf_id = None
    else:
        target = leaf
        if canonical_ids:
            uncanon = {c: i for i, c in zip(first_ids, canon.values(), strict=True)}
            target = uncanon.get(leaf, leaf)
        if (target if type(target) is str else id_key(target)) not in index:
            raise MissingLeafError(target)
        leaf_id = target

    # Pi's buildSessionContext: no leaf -> empty; else the leaf entry, or the last
    # entry when the id is falsy/unknown. Pi 0.73.1 would loop on a parent cycle:
    # walk_from_entry raises CycleError (the oracle refuses these too).
    path: list[dict] = []
    if leaf_id is not None and entries:
        start = index.get(leaf_id if type(leaf_id) is str else id_key(leaf_id)) if js_truthy(leaf_id) else None
        path = walk_from_entry(index, start if start is not None else entries[-1])
    ctx = context_from_path(path) if path else SessionContext([], "off", None, [])
    messages = list(ctx.messages)
    if canonical_ids:
        messages = [
            {**m, "fromId": cid(m["fromId"])} if type(m) is dict and m.get("role") == "branchSummary" and "fromId" in m else m
            for m in messages
        ]

    state = {id_key(target): value for target, value in label_state(entries).items()}
    labels_out: dict = {}
    for i in first_ids:
        found = state.get(i if type(i) is str else id_key(i))
        if found is not None:
            labels_out[js_to_string(cid(i))] = found[0]

    view: dict = {"version": header.get("version", None), "sessionId": header.get("id")}
    if leaf_id is not UNDEFINED:
        view["leafId"] = cid(leaf_id)
    view["entryCount"] = len(entries)
    view["entryIds"] = [cid(e.get("id")) for e in entries]
    view["messages"] = messages
    if ctx.thinking_level is not None or _thinking_level_is_null(path):
        view["thinkingLevel"] = ctx.thinking_level
    view["model"] = ctx.model
    view["labels"] = labels_out
    view["sessionName"] = session_name(entries)
    view["tree"] = get_tree(entries, rename=cid if canonical_ids else None)
    view["fileVersion"] = file_version
    view["header"] = header
    view["messageEntryIds"] = [cid(i) for i in ctx.source_entry_ids]
    view["llmMessages"] = convert_to_llm(messages)
    if canonical_ids:
        view["canonicalIds"] = True
    return view


def _thinking_level_is_null(path: list[dict]) -> bool:
    """True when the deciding ``thinking_level_change`` has ``"thinkingLevel": null``
    (printed as null) rather than no key at all (left out, as JavaScript's undefined)."""
    for entry in reversed(path):
        if entry.get("type") == "thinking_level_change":
            return "thinkingLevel" in entry
    return False
