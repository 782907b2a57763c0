"""Whole-session views: labels, session name, Pi's getTree() order, children."""

from __future__ import annotations

import pytest

from sessions_tree import entries as E
from sessions_tree.tree import (
    MAX_TREE_NODES,
    TreeTooLargeError,
    children_by_parent,
    get_tree,
    label_state,
    labels,
    session_name,
)


def ts(seconds: int) -> str:
    return f"2025-01-01T00:00:{seconds:02d}.000Z"


def custom(i, parent, t=0, **extra):
    entry = E.custom_entry(id=i, parent_id=parent, timestamp=ts(t), custom_type="x")
    entry.update(extra)
    return entry


def label(i, target, value, t=0):
    return E.label_entry(id=i, parent_id=None, timestamp=ts(t), target_id=target, label=value)


def shape(nodes):
    return [(n.get("id"), shape(n["children"])) if n["children"] else n.get("id") for n in nodes]


def test_labels_latest_line_wins_and_clears_move_to_end():
    entries = [
        custom("a", None), custom("b", "a"),
        label("l1", "a", "first", 1), label("l2", "b", "bee", 2), label("l3", "a", "renamed", 3),
        label("l4", "zz", "dangling", 4),
    ]
    assert list(label_state(entries).items()) == [("a", ("renamed", ts(3))), ("b", ("bee", ts(2))), ("zz", ("dangling", ts(4)))]
    entries += [label("l5", "a", None, 5), label("l6", "b", "", 6), label("l7", "a", "again", 7)]
    assert labels(entries) == {"zz": "dangling", "a": "again"}
    assert list(labels(entries)) == ["zz", "a"]


def test_session_name_is_last_info_line_trimmed():
    info = lambda i, name: E.session_info_entry(id=i, parent_id=None, timestamp=ts(0), name=name)  # noqa: E731
    assert session_name([]) is None
    assert session_name([info("s1", "  first ")]) == "first"
    assert session_name([info("s1", "first"), custom("x", None), info("s2", " \u3000")]) is None
    entry = info("s3", "x")
    entry["name"] = "\ufeff padded\u00a0"  # written by someone else, untrimmed
    assert session_name([entry]) == "padded"


def test_tree_roots_in_file_order_children_by_timestamp():
    entries = [
        custom("r", None, 0),
        custom("late", "r", 9),
        custom("early", "r", 1),
        custom("same1", "r", 5),
        custom("same2", "r", 5),
        custom("orphan", "missing", 0),
        custom("self", "self", 0),
        custom("kid", "early", 2),
    ]
    assert shape(get_tree(entries)) == [("r", [("early", ["kid"]), "same1", "same2", "late"]), "orphan", "self"]


def test_tree_invalid_timestamps_keep_v8_order():
    # Invalid dates compare as "not less" both ways; with one bad entry the run
    # detection of TimSort keeps the original order around it.
    entries = [custom("r", None, 0), custom("b", "r", 5), custom("bad", "r", 0), custom("a", "r", 1)]
    entries[2]["timestamp"] = "garbage"
    assert shape(get_tree(entries)) == [("r", ["b", "bad", "a"])]


def test_tree_nodes_show_last_line_and_repeat_for_duplicates():
    entries = [custom("r", None), custom("a", "r"), custom("b", "a"), custom("a", "r", type="label")]
    tree = get_tree(entries)
    # "a" is linked twice (two lines), each showing the last line's type; its child twice too.
    assert shape(tree) == [("r", [("a", ["b"]), ("a", ["b"])])]
    assert [n["type"] for n in tree[0]["children"]] == ["label", "label"]


def test_tree_hides_cycles_and_renames():
    entries = [custom("r", None), custom("c1", "c2"), custom("c2", "c1"), custom("k", "r")]
    assert shape(get_tree(entries)) == [("r", ["k"])]
    renamed = get_tree(entries, rename=lambda i: i.upper())
    assert shape(renamed) == [("R", ["K"])]


def test_tree_refuses_what_pi_cannot_finish():
    # Duplicate ids that link an entry below itself: Pi's getTree() never returns.
    entries = [custom("a", None), custom("b", "a"), custom("a", "b")]
    with pytest.raises(TreeTooLargeError, match="never finish"):
        get_tree(entries)
    # A re-flushed chain doubles the tree per duplicated level.
    chain = [custom("e0", None)] + [custom(f"e{i}", f"e{i - 1}") for i in range(1, 25)]
    with pytest.raises(TreeTooLargeError, match=str(MAX_TREE_NODES)):
        get_tree(chain + chain)


def test_tree_of_a_deep_chain_is_built_without_recursion():
    chain = [custom("e0", None)] + [custom(f"e{i}", f"e{i - 1}") for i in range(1, 50_000)]
    node = get_tree(chain)[0]
    depth = 1
    while node["children"]:
        node = node["children"][0]
        depth += 1
    assert depth == 50_000


def test_children_by_parent_in_first_appearance_order():
    entries = [custom("r", None), custom("b", "r", 9), custom("a", "r", 1), custom("o", "gone"), custom("b", "a")]
    assert children_by_parent(entries) == {None: ["r"], "a": ["b"], "r": ["a"], "gone": ["o"]}
    assert list(children_by_parent(entries)) == [None, "a", "r", "gone"]
