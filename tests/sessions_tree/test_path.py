"""Root-to-leaf paths: Pi's walk rules, and clear errors where Pi loops or guesses."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_tree.jsonl import UNDEFINED
from sessions_tree.path import (
    CycleError,
    MissingLeafError,
    MissingParentError,
    get_path,
    id_key,
    index_by_id,
    js_same,
    js_truthy,
    walk_from_entry,
    walk_path,
)


def entry(i, parent, **extra):
    return {"type": "custom", "customType": "t", "id": i, "parentId": parent, "timestamp": "2025-01-01T00:00:00.000Z", **extra}


def parent_lookup(entries):
    index = index_by_id(entries)

    def parent_of(i):
        p = index[i]["parentId"]  # KeyError for unknown ids
        return p if js_truthy(p) else None

    return parent_of


def finishes(fn, *args, **kwargs):
    """Run ``fn``; fail (instead of hanging the suite) if it does not return.
    A liveness guard, not a speed assertion: the limit is far above any real run."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), f"{fn.__name__} did not finish: it loops"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


CHAIN = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("d", "c"), entry("x", "b")]


def test_walk_path_gives_root_to_leaf():
    assert walk_path("d", parent_lookup(CHAIN)) == ["a", "b", "c", "d"]
    assert walk_path("x", parent_lookup(CHAIN)) == ["a", "b", "x"]
    assert walk_path("a", parent_lookup(CHAIN)) == ["a"]
    assert [e["id"] for e in get_path(CHAIN, "d")] == ["a", "b", "c", "d"]
    assert [e["id"] for e in get_path(index_by_id(CHAIN), "x")] == ["a", "b", "x"]


def test_missing_leaf_names_the_id():
    with pytest.raises(MissingLeafError, match="Entry zz not found") as err:
        walk_path("zz", parent_lookup(CHAIN))
    assert err.value.leaf_id == "zz"
    with pytest.raises(MissingLeafError, match="zz"):
        get_path(CHAIN, "zz")


def test_missing_parent_is_a_root_unless_strict():
    entries = [entry("a", None), entry("o", "gone"), entry("p", "o")]
    assert walk_path("p", parent_lookup(entries)) == ["o", "p"]
    assert [e["id"] for e in get_path(entries, "p")] == ["o", "p"]
    for call in (lambda: walk_path("p", parent_lookup(entries), strict=True), lambda: get_path(entries, "p", strict=True)):
        with pytest.raises(MissingParentError) as err:
            call()
        assert (err.value.entry_id, err.value.parent_id) == ("o", "gone")
        assert "'o'" in str(err.value) and "'gone'" in str(err.value)


def test_falsy_parent_ids_end_the_walk_like_pi():
    entries = [entry("a", None), entry("b", ""), entry("c", "b")]
    assert [e["id"] for e in get_path(entries, "c", strict=True)] == ["b", "c"]
    raw_parents = {"a": None, "b": "", "c": "b"}
    assert walk_path("c", raw_parents.__getitem__, strict=True) == ["b", "c"]
    no_parent_key = {"type": "custom", "id": "n"}
    assert get_path([no_parent_key], "n") == [no_parent_key]


@pytest.mark.parametrize("length", [1, 2, 3, 5, 8])
def test_cycles_of_any_length_raise_and_never_hang(length):
    ids = [f"c{i}" for i in range(length)]
    entries = [entry("root", None)]
    entries += [entry(ids[i], ids[i - 1]) for i in range(length)]  # c0's parent is the last: a loop
    entries.append(entry("tail", ids[-1]))
    for leaf in (ids[0], "tail"):
        with pytest.raises(CycleError) as err:
            finishes(walk_path, leaf, parent_lookup(entries))
        assert set(err.value.ids) == set(ids) and err.value.ids[0] == err.value.ids[-1]
        with pytest.raises(CycleError) as err:
            finishes(get_path, entries, leaf)
        assert set(err.value.ids) == set(ids) and len(err.value.ids) == length + 1
        assert all(repr(i) in str(err.value) for i in ids)


def test_self_parent_is_a_cycle_for_walks():
    with pytest.raises(CycleError, match="'s' -> 's'"):
        get_path([entry("s", "s")], "s")


def test_index_last_line_wins():
    first, second = entry("a", None, n=1), entry("a", None, n=2)
    assert index_by_id([first, second])["a"] is second
    assert get_path([first, second, entry("b", "a")], "b")[0] is second


def test_walk_from_an_unindexed_leaf():
    entries = [entry("a", None), {"type": "custom", "parentId": "a"}]
    index = index_by_id(entries)
    assert [e.get("id") for e in walk_from_entry(index, entries[-1])] == ["a", None]


def test_odd_ids_follow_javascript_equality():
    entries = [entry(5, None), entry("m", 5.0), entry("t", True)]
    index = index_by_id(entries)
    assert [e["id"] for e in get_path(index, "m")] == [5, "m"]
    assert [e["id"] for e in get_path(index, "t")] == ["t"]  # true is not an entry id here
    assert js_same(1, 1.0) and not js_same(1, True) and not js_same("1", 1) and js_same(UNDEFINED, UNDEFINED)
    assert not js_same({}, {}) and js_same(None, None)
    assert id_key("x") == "x" and id_key(None) is None
    assert [js_truthy(v) for v in ("", "0", 0, 0.0, 1, None, UNDEFINED, False, True, [], {})] == [
        False, True, False, False, True, False, False, False, True, True, True
    ]


def test_deep_paths_do_not_recurse():
    n = 100_000
    entries = [entry("e0", None)] + [entry(f"e{i}", f"e{i - 1}") for i in range(1, n)]
    path = get_path(entries, f"e{n - 1}")
    assert len(path) == n and path[0]["id"] == "e0"
    assert len(walk_path(f"e{n - 1}", parent_lookup(entries))) == n


# --------------------------------------------------------------------------- property


def reference_walk(parents: dict, leaf: str):
    """Plain reading of the rules: follow links, stop at None/unknown, fail on a repeat."""
    if leaf not in parents:
        return "missing"
    out = [leaf]
    while parents[out[-1]] is not None:
        p = parents[out[-1]]
        if p not in parents:
            break
        if p in out:
            return "cycle"
        out.append(p)
    return list(reversed(out))


ids_st = st.sampled_from([f"i{k}" for k in range(8)])


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(ids_st, st.one_of(st.none(), ids_st, st.just("unknown")), min_size=1), ids_st)
def test_walks_match_reference(parents, leaf):
    entries = [entry(i, p) for i, p in parents.items()]
    expected = reference_walk(parents, leaf)
    for walk in (
        lambda: walk_path(leaf, parent_lookup(entries)),
        lambda: [e["id"] for e in get_path(entries, leaf)],
    ):
        if expected == "missing":
            with pytest.raises(MissingLeafError):
                walk()
        elif expected == "cycle":
            with pytest.raises(CycleError):
                finishes(walk)
        else:
            assert finishes(walk) == expected
