"""ls / find / grep: ordering, hidden and ignored files, symlinks, limits, hostile patterns."""

from __future__ import annotations

import os

import pytest

from tests.toolcatalog.helpers import SECRET


@pytest.fixture
def tree(workspace, outside):
    """A small repository with ignores, hidden files, a nested repo rule and symlinks."""
    files = {
        "README.md": "hello readme\n",
        "src/app.py": "import os\nprint('hello')\n# TODO: fix\n",
        "src/util.py": "def helper():\n    return 'hello'\n",
        "src/app.spec.ts": "test('hello')\n",
        "src/deep/x/y/z.py": "hello = 1\n",
        ".env": "HELLO=1\n",
        ".hidden/h.txt": "hello hidden\n",
        "build/out.js": "hello build\n",
        "logs/a.log": "hello log\n",
        "logs/keep.log": "hello kept\n",
        "node_modules/pkg/index.js": "hello module\n",
        "pkg/.gitignore": "generated/\n",
        "pkg/generated/g.py": "hello generated\n",
        "pkg/real.py": "hello real\n",
        ".git/config": "hello git internals\n",
    }
    for rel, text in files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (workspace / ".gitignore").write_text("build/\n*.log\n!keep.log\nnode_modules/\n")
    (workspace / "link_out").symlink_to(outside)  # directory outside
    (workspace / "secret_link.txt").symlink_to(outside / "secret.txt")
    (workspace / "src_link").symlink_to(workspace / "src")  # directory inside
    return workspace


def test_ls_sorted_with_markers(call, tree):
    text = call("ls").text_output()
    assert text.split("\n") == [
        ".env", ".git/", ".gitignore", ".hidden/", "build/", "link_out -> " + str(tree.parent / "outside"),
        "logs/", "node_modules/", "pkg/", "README.md", "secret_link.txt -> " + str(tree.parent / "outside/secret.txt"),
        "src/", "src_link -> " + str(tree / "src"),
    ]


def test_ls_limit_and_empty(call, workspace):
    for i in range(12):
        (workspace / f"f{i:02d}").write_text("")
    result = call("ls", limit=5)
    assert result.text_output() == "f00\nf01\nf02\nf03\nf04\n\n[5 entries limit reached. Use limit=10 for more]"
    assert result.details == {"entryLimitReached": 5}
    (workspace / "empty").mkdir()
    assert call("ls", path="empty").text_output() == "(empty directory)"
    assert call("ls", path="f00").text_output() == "Not a directory: f00"


def test_ls_refuses_symlinked_directory_outside(call, tree):
    result = call("ls", path="link_out")
    assert result.is_error and "resolves outside the workspace" in result.text_output()


def test_find_honours_gitignore_hidden_and_symlinks(call, tree):
    found = call("find", pattern="*").text_output().split("\n")
    assert ".env" in found and ".hidden/h.txt" in found  # hidden files included
    assert "logs/keep.log" in found and "logs/a.log" not in found  # negation works
    assert not any(p.startswith(("build", "node_modules", ".git/")) for p in found)
    assert "pkg/real.py" in found and "pkg/generated/" not in found  # nested .gitignore
    assert "link_out" in found and not any(p.startswith("link_out/") for p in found)  # never walked out
    assert "src_link" in found and not any(p.startswith("src_link/") for p in found)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.py", ["pkg/real.py", "src/app.py", "src/deep/x/y/z.py", "src/util.py"]),
        ("src/*.py", ["src/app.py", "src/util.py"]),
        ("**/*.py", ["pkg/real.py", "src/app.py", "src/deep/x/y/z.py", "src/util.py"]),
        ("src/**/*.py", ["src/app.py", "src/deep/x/y/z.py", "src/util.py"]),
        ("*.spec.ts", ["src/app.spec.ts"]),
        ("*.{md,ts}", ["README.md", "src/app.spec.ts"]),
        ("[ru]*.py", ["pkg/real.py", "src/util.py"]),
        ("deep", ["src/deep/"]),
    ],
)
def test_find_glob_semantics(call, tree, pattern, expected):
    assert call("find", pattern=pattern).text_output().split("\n") == expected


def test_find_in_subdirectory_keeps_ancestor_ignores(call, tree):
    (tree / "logs/deeper").mkdir()
    (tree / "logs/deeper/x.log").write_text("")
    assert call("find", pattern="*", path="logs").text_output().split("\n") == ["deeper/", "keep.log"]


def test_find_limit_and_no_match(call, tree):
    result = call("find", pattern="*.py", limit=2)
    assert result.text_output().endswith("[2 results limit reached. Use limit=4 for more, or refine pattern]")
    assert call("find", pattern="*.rs").text_output() == "No files found matching pattern"
    bad = call("find", pattern="{a,b")
    assert bad.is_error and "unclosed '{'" in bad.text_output()


def test_grep_basic_and_gitignore(call, tree):
    lines = call("grep", pattern="hello").text_output().split("\n")
    assert "README.md:1: hello readme" in lines
    assert "src/app.py:2: print('hello')" in lines
    assert ".hidden/h.txt:1: hello hidden" in lines
    assert "logs/keep.log:1: hello kept" in lines
    joined = "\n".join(lines)
    for hidden_away in ("build/out.js", "logs/a.log", "node_modules", "generated", ".git/config", SECRET):
        assert hidden_away not in joined


def test_grep_never_reads_through_symlinks(call, tree):
    out = call("grep", pattern="CANARY").text_output()
    assert out == "No matches found"
    direct = call("grep", pattern="CANARY", path="secret_link.txt")
    assert direct.is_error and "outside the workspace" in direct.text_output()


def test_grep_options(call, tree):
    assert call("grep", pattern="HELLO", glob="*.md").text_output() == "No matches found"
    assert call("grep", pattern="HELLO", glob="*.md", ignoreCase=True).text_output() == "README.md:1: hello readme"
    assert call("grep", pattern="print(", literal=True, glob="*.py").text_output() == "src/app.py:2: print('hello')"
    ctx_out = call("grep", pattern="print", path="src/app.py", context=1).text_output()
    assert ctx_out == "app.py-1- import os\napp.py:2: print('hello')\napp.py-3- # TODO: fix"
    assert call("grep", pattern="hello", glob="src/**/*.py").text_output().split("\n") == [
        "src/app.py:2: print('hello')", "src/deep/x/y/z.py:1: hello = 1", "src/util.py:2:     return 'hello'",
    ]


def test_grep_limit_long_lines_and_binary(call, workspace):
    (workspace / "many.txt").write_text("\n".join(f"match {i}" for i in range(300)))
    result = call("grep", pattern="match")
    assert result.details["matchLimitReached"] == 100
    assert result.text_output().endswith("[100 matches limit reached. Use limit=200 for more, or refine pattern]")
    (workspace / "many.txt").unlink()
    (workspace / "long.txt").write_text("needle " + "x" * 2000)
    long = call("grep", pattern="needle")
    assert long.details == {"linesTruncated": True}
    assert "... [truncated]" in long.text_output() and "Some lines truncated to 500 chars" in long.text_output()
    (workspace / "long.txt").unlink()
    (workspace / "bin.dat").write_bytes(b"needle\x00\x01")
    assert call("grep", pattern="needle").text_output() == "No matches found"


def test_grep_unicode_and_invalid_bytes(call, workspace):
    (workspace / "u.txt").write_bytes("查找 😀 target\n".encode() + b"target \xed\xa0\x80 \xff\n")
    text = call("grep", pattern="target").text_output()
    assert text == "u.txt:1: 查找 😀 target\nu.txt:2: target \ufffd\ufffd\ufffd \ufffd"


def test_grep_bad_and_catastrophic_patterns_fail_cleanly(call, workspace):
    bad = call("grep", pattern="(unclosed")
    assert bad.is_error and "Invalid regex" in bad.text_output()
    (workspace / "evil.txt").write_text("a" * 40 + "\n")
    slow = call("grep", pattern="(a|aa)+c$")
    assert slow.is_error and "too slow" in slow.text_output()


def test_walk_skips_a_directory_swapped_for_a_symlink(workspace, outside):
    """The walker opens every directory with O_NOFOLLOW: a swap makes it skip, not follow."""
    from toolcatalog.workspace_walk import IgnoreRules, walk

    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("x")
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    seen = []
    try:
        for entry in walk(fd, rules=IgnoreRules()):
            seen.append(entry.path)
            if entry.path == "d":  # swap right after it was listed, before it is entered
                (workspace / "d" / "f.txt").unlink()
                (workspace / "d").rmdir()
                (workspace / "d").symlink_to(outside)
    finally:
        os.close(fd)
    assert seen == ["d"]
