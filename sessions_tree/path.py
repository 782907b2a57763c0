"""Root-to-leaf paths through the entry tree, with Pi's rules and clear errors.

Pi indexes entries by id with the **last line winning** and walks ``parentId``
links from the leaf until a link is empty or points at an unknown id (that entry
is then the root: an orphan). Neta follows those rules and adds what Pi 0.73.1
lacks (pi-session-format.md §5, §17):

- an unknown leaf raises :class:`MissingLeafError`;
- ``strict=True`` turns an unknown parent into :class:`MissingParentError`
  instead of ending the walk;
- a cycle raises :class:`CycleError` (Pi loops forever). An entry whose
  ``parentId`` is its own id is a cycle of length 1 for walks, although Pi's
  ``getTree()`` shows it as a root (see :func:`sessions_tree.tree.get_tree`):
  Pi's ``buildSessionContext`` would spin on it, so there is no Pi behaviour to
  keep, and the oracle refuses it too.

Walks are iterative and O(path length). Ids are compared like JavaScript does
(``Map`` keys and ``===``): string ids as themselves; :func:`id_key` maps the odd
non-string values a hand-edited file may hold so they behave as in Pi.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sessions_tree.jsonl import UNDEFINED

__all__ = [
    "CycleError",
    "MissingLeafError",
    "MissingParentError",
    "PathError",
    "get_path",
    "id_key",
    "index_by_id",
    "js_same",
    "js_truthy",
    "walk_from_entry",
    "walk_path",
]


class PathError(ValueError):
    """A root-to-leaf path cannot be built."""


class MissingLeafError(PathError):
    def __init__(self, leaf_id):
        self.leaf_id = leaf_id
        super().__init__(f"Entry {leaf_id} not found")


class MissingParentError(PathError):
    def __init__(self, entry_id, parent_id):
        self.entry_id = entry_id
        self.parent_id = parent_id
        super().__init__(f"entry {entry_id!r} has parentId {parent_id!r}, which is not an entry of this session")


class CycleError(PathError):
    def __init__(self, ids: list):
        # ``ids`` in walk order (child first), the repeated id again at the end.
        self.ids = ids
        shown = " -> ".join(repr(i) for i in ids)
        super().__init__(f"parent cycle on the path: {shown} (each entry's parentId is the next one)")


_MISSING_KEY = ("undefined",)


def id_key(value):
    """Dictionary key for an id value with JavaScript ``Map`` semantics.

    Strings (every real id) are their own key; ``None`` is ``null``;
    :data:`~sessions_tree.jsonl.UNDEFINED` is a missing key; numbers compare as
    JavaScript numbers (``1 == 1.0``, but not ``True`` or ``"1"``); objects and
    arrays only equal themselves.
    """
    if type(value) is str or value is None:
        return value
    if value is UNDEFINED:
        return _MISSING_KEY
    if value is True or value is False:
        return ("bool", value)
    if isinstance(value, (int, float)):
        try:
            return ("num", float(value))
        except OverflowError:
            return ("num", float("inf") if value > 0 else float("-inf"))
    if isinstance(value, str):
        return str(value)
    return ("obj", id(value))


def js_same(a, b) -> bool:
    """JavaScript ``a === b`` for JSON values (objects by identity)."""
    if type(a) is str and type(b) is str:
        return a == b
    return id_key(a) == id_key(b)


def js_truthy(value) -> bool:
    """JavaScript truthiness of a JSON value (``""``, ``0``, ``null``, missing are falsy;
    empty lists and objects are truthy)."""
    if type(value) is str:
        return value != ""
    if value is None or value is UNDEFINED or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0
    return True


def index_by_id(entries: Iterable[dict]) -> dict:
    """``{id: entry}``, the last line winning for duplicate ids (Pi's ``byId``).

    Keys are :func:`id_key` values: the id itself for string ids.
    """
    index = {}
    for entry in entries:
        i = entry.get("id", UNDEFINED)
        index[i if type(i) is str else id_key(i)] = entry
    return index


def walk_path(leaf_id, parent_of: Callable, *, strict: bool = False) -> list:
    """Ids from the root to ``leaf_id``.

    ``parent_of(id)`` returns the parent id, ``None`` (or another falsy value,
    as in Pi) for a root, and raises
    KeyError for an unknown id. An unknown leaf raises MissingLeafError; an
    unknown parent ends the walk (Pi: the entry is an orphan root) or, with
    ``strict=True``, raises MissingParentError; any cycle raises CycleError.
    """
    try:
        parent = parent_of(leaf_id)
    except KeyError:
        raise MissingLeafError(leaf_id) from None
    ids = [leaf_id]
    seen = {id_key(leaf_id)}
    current = leaf_id
    while parent if type(parent) is str else js_truthy(parent):  # "" and None end it, as in Pi
        key = id_key(parent)
        if key in seen:
            raise CycleError(_cycle(ids, parent))
        try:
            grandparent = parent_of(parent)
        except KeyError:
            if strict:
                raise MissingParentError(current, parent) from None
            break
        seen.add(key)
        ids.append(parent)
        current, parent = parent, grandparent
    ids.reverse()
    return ids


def _cycle(ids_child_first: list, repeated) -> list:
    key = id_key(repeated)
    start = next(i for i, x in enumerate(ids_child_first) if id_key(x) == key)
    return [*ids_child_first[start:], repeated]


def walk_from_entry(index: Mapping, entry: dict, *, strict: bool = False) -> list[dict]:
    """Entries from the root to ``entry`` (which need not be in ``index``, e.g. an
    id-less last line), following Pi's walk: a falsy ``parentId`` ends it, an
    unknown one ends it too unless ``strict``; cycles raise CycleError."""
    path = [entry]
    append = path.append
    get = index.get
    # Every step lands on a distinct entry of ``index`` unless the links loop, so
    # a walk longer than the index (plus an unindexed start) has met a cycle.
    for _ in range(len(index) + 1):
        parent_id = entry.get("parentId")
        if type(parent_id) is str:
            if not parent_id:
                break
            parent = get(parent_id)
        else:
            if not js_truthy(parent_id):
                break
            parent = get(id_key(parent_id))
        if parent is None:
            if strict:
                raise MissingParentError(entry.get("id"), parent_id)
            break
        append(parent)
        entry = parent
    else:
        raise CycleError(_find_cycle(path))
    path.reverse()
    return path


def _find_cycle(path: list[dict]) -> list:
    """The ids of the first loop in a walk (child first, the repeated id at the end)."""
    position: dict[int, int] = {}
    for i, entry in enumerate(path):
        if id(entry) in position:
            ids = [e.get("id") for e in path[position[id(entry)] : i]]
            return [*ids, entry.get("id")]
        position[id(entry)] = i
    raise AssertionError("no cycle in walk")  # pragma: no cover


def get_path(entries_or_index, leaf_id, *, strict: bool = False) -> list[dict]:
    """Entries from the root to ``leaf_id`` over a list of entries or an
    :func:`index_by_id` mapping; errors as :func:`walk_path`."""
    index = entries_or_index if isinstance(entries_or_index, Mapping) else index_by_id(entries_or_index)
    leaf = index.get(leaf_id if type(leaf_id) is str else id_key(leaf_id))
    if leaf is None:
        raise MissingLeafError(leaf_id)
    return walk_from_entry(index, leaf, strict=strict)
