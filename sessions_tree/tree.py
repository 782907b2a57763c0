"""Whole-session views of the entry tree: labels, name, Pi's ``getTree()``, children.

These look at **all** entries in file order, whatever the leaf
(pi-session-format.md §7.5-§7.7):

- labels: the latest ``label`` line per target wins; a missing or empty
  ``label`` clears it; labels on unknown targets stay in the state (Pi keeps them
  in its map) but views show only existing entries;
- session name: the last ``session_info`` line, trimmed; empty means none;
- tree: Pi's ``getTree()`` exactly, including its quirks: roots are entries with
  ``parentId`` null, equal to their own id, or unknown (orphans), in file order;
  children are sorted by ``Date(timestamp)`` (stable, invalid dates compare as
  "not less" both ways, as in V8); a duplicated id yields one node per line that
  links to it, all showing the last line with that id; entries on a parent cycle
  (and their descendants) are not in the tree.
"""

from __future__ import annotations

from functools import cmp_to_key

from sessions_tree.context import date_ms
from sessions_tree.jsonl import UNDEFINED, js_trim
from sessions_tree.path import id_key, js_same, js_truthy

__all__ = [
    "MAX_TREE_NODES",
    "TreeTooLargeError",
    "children_by_parent",
    "get_tree",
    "label_state",
    "labels",
    "session_name",
]

MAX_TREE_NODES = 1_000_000


class TreeTooLargeError(ValueError):
    """Pi's ``getTree()`` would not finish (duplicate ids repeating whole subtrees, or
    linking an entry below itself); the oracle refuses these files too."""


def label_state(entries) -> dict:
    """``{target_id: (label, timestamp)}`` in Pi's label-map order (a relabelled
    target keeps its place, a cleared and re-set one moves to the end)."""
    state: dict = {}
    keys: dict = {}
    for entry in entries:
        if entry.get("type") != "label":
            continue
        target = entry.get("targetId", UNDEFINED)
        key = target if type(target) is str else id_key(target)
        label = entry.get("label", UNDEFINED)
        if label if type(label) is str else js_truthy(label):
            if key not in state:
                keys[key] = target
            state[key] = (label, entry.get("timestamp"))
        else:
            state.pop(key, None)
            keys.pop(key, None)
    if all(type(k) is str for k in state):
        return state
    # Targets JavaScript keys by identity (objects, arrays) label nothing a walk can reach.
    return {keys[k]: v for k, v in state.items() if _hashable(keys[k])}


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def labels(entries) -> dict:
    """``{target_id: label}`` (see :func:`label_state`)."""
    return {target: label for target, (label, _) in label_state(entries).items()}


def session_name(entries) -> str | None:
    """The trimmed ``name`` of the last ``session_info`` line; None if empty or none."""
    for entry in reversed(entries):
        if entry.get("type") == "session_info":
            name = entry.get("name")
            if type(name) is not str:
                return None
            return js_trim(name) or None
    return None


def children_by_parent(entries) -> dict:
    """``{parent_id: [child ids]}`` as Pi's ``getChildren``: one child per distinct id
    (the last line with that id decides its parent), in order of the id's first
    appearance. Roots are under ``None``; orphans under their missing parent's id."""
    by_id: dict = {}
    for entry in entries:
        i = entry.get("id")
        by_id[i if type(i) is str or i is None else id_key(i)] = entry
    children: dict = {}
    for entry in by_id.values():
        parent = entry.get("parentId")
        children.setdefault(parent if type(parent) is str or parent is None else id_key(parent), []).append(
            entry.get("id")
        )
    return children


# A tree node is a list [entry, children, ms, out]: the (last) line with its id,
# its child nodes (one per linking line), its Date(timestamp) in ms (None: NaN,
# filled in only where children are sorted) and its output dict.
_ENTRY, _CHILDREN, _MS, _OUT = 0, 1, 2, 3
_UNSET = object()


def _compare(a: list, b: list) -> int:
    # Pi: new Date(a.timestamp).getTime() - new Date(b.timestamp).getTime(); V8's
    # TimSort (like CPython's, from which it was ported) only asks "< 0", and NaN
    # never is, so an invalid date is "not less" than anything, both ways.
    x, y = a[_MS], b[_MS]
    if x is None or y is None:
        return 0
    return -1 if x < y else (1 if x > y else 0)


_SORT_KEY = cmp_to_key(_compare)


def _ms(node: list) -> int:
    return node[_MS]


def _tree_size(roots: list[list]) -> float:
    """How many nodes Pi's getTree() emits (inf when a node is linked below itself)."""
    size: dict[int, int] = {}
    on_stack: set[int] = set()
    total = 0
    for root in roots:
        if id(root) not in size:
            stack = [(root, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    n = 1
                    for child in node[_CHILDREN]:
                        n += size[id(child)]
                    size[id(node)] = min(n, MAX_TREE_NODES + 1)
                    on_stack.discard(id(node))
                    continue
                if id(node) in size:
                    continue
                on_stack.add(id(node))
                stack.append((node, True))
                for child in node[_CHILDREN]:
                    if id(child) in on_stack:
                        return float("inf")
                    if id(child) not in size:
                        stack.append((child, False))
        total += size[id(root)]
        if total > MAX_TREE_NODES:
            return total
    return total


def get_tree(entries, *, rename=None) -> list[dict]:
    """Pi's ``getTree()`` as nested ``{"id", "type", "children"}`` dicts.

    ``rename`` maps ids for display (e.g. canonical ids). A node shared by
    several parents (duplicate ids) is the same dict in each place: treat the
    result as read-only. Raises TreeTooLargeError where Pi would not finish.
    """
    nodes: dict = {}
    for entry in entries:
        i = entry.get("id", UNDEFINED)
        nodes[i if type(i) is str else id_key(i)] = [entry, [], _UNSET, None]
    roots: list[list] = []
    for entry in entries:
        i = entry.get("id", UNDEFINED)
        node = nodes[i if type(i) is str else id_key(i)]
        parent_id = entry.get("parentId", UNDEFINED)
        if parent_id is None or (parent_id == i if type(parent_id) is str else js_same(parent_id, i)):
            roots.append(node)
            continue
        parent = nodes.get(parent_id if type(parent_id) is str else id_key(parent_id))
        if parent is None:
            roots.append(node)
        else:
            parent[_CHILDREN].append(node)

    if len(nodes) != len(entries):  # only duplicate ids can repeat or loop subtrees
        size = _tree_size(roots)
        if size == float("inf"):
            raise TreeTooLargeError("Pi's getTree() would never finish (duplicate ids link an entry below itself)")
        if size > MAX_TREE_NODES:
            raise TreeTooLargeError(
                f"Pi's getTree() would emit more than {MAX_TREE_NODES} nodes "
                "(duplicate ids repeat whole subtrees)"
            )

    # Sort children by timestamp exactly as Pi does: a stack walk from the roots,
    # sorting each visited node's children (shared nodes are sorted once per visit).
    stack = list(roots)
    pop, extend = stack.pop, stack.extend
    while stack:
        children = pop()[_CHILDREN]
        if len(children) > 1:
            valid = True
            for child in children:
                if child[_MS] is _UNSET:
                    child[_MS] = date_ms(child[_ENTRY].get("timestamp", UNDEFINED))
                if child[_MS] is None:
                    valid = False
            children.sort(key=_ms if valid else _SORT_KEY)
        extend(children)

    for node in nodes.values():
        entry = node[_ENTRY]
        out = {}
        if "id" in entry:
            out["id"] = rename(entry["id"]) if rename is not None else entry["id"]
        if "type" in entry:
            out["type"] = entry["type"]
        node[_OUT] = out
    for node in nodes.values():
        children = node[_CHILDREN]
        if not children:
            node[_OUT]["children"] = []
        elif len(children) == 1:
            node[_OUT]["children"] = [children[0][_OUT]]
        else:
            node[_OUT]["children"] = [c[_OUT] for c in children]
    return [r[_OUT] for r in roots]
