"""Discovery on real folders: roots, Pi's walking rules, precedence and collisions."""

from __future__ import annotations

import os
from pathlib import Path

from skills_registry.discovery import (
    SkillRoot,
    default_roots,
    discover_skills,
    project_roots,
    walk_root,
)
from tests.support.skills import write_skill


def names(result, status=None):
    return [s.name for s in result.skills if status is None or s.status == status]


def rels(found, root: Path):
    return [os.path.relpath(p, root) for p, _ in found]


def test_walk_rules(tmp_path):
    root = tmp_path / "skills"
    write_skill(root, "b-skill")
    write_skill(root, "a-skill", files={"inner/SKILL.md": "---\nname: inner\ndescription: d\n---\n"})
    write_skill(root, "group/deep")
    write_skill(root, ".hidden/secret")
    write_skill(root, "node_modules/pkg")
    write_skill(root, "group/ignored-one")
    (root / "group" / ".gitignore").write_text("ignored-one/\n")
    write_skill(root, "Zeta")  # uppercase sorts first byte-wise
    (root / "loose.md").write_text("---\ndescription: d\n---\n")
    (root / "notes.txt").write_text("not a skill")
    found = walk_root(SkillRoot(root, "workspace", "test"))
    assert rels(found, root) == [
        "Zeta/SKILL.md",
        "a-skill/SKILL.md",  # inner/SKILL.md below it is not a separate skill
        "b-skill/SKILL.md",
        "group/deep/SKILL.md",
        "loose.md",
    ]
    assert [is_folder for _, is_folder in found] == [True, True, True, True, False]


def test_agents_roots_ignore_loose_md(tmp_path):
    root = tmp_path / ".agents" / "skills"
    write_skill(root, "real")
    (root / "loose.md").write_text("---\ndescription: d\n---\n")
    found = walk_root(SkillRoot(root, "project", ".agents/skills", include_root_files=False))
    assert rels(found, root) == ["real/SKILL.md"]


def test_root_level_ignore_file_and_negation(tmp_path):
    root = tmp_path / "skills"
    for name in ("keep", "drop-a", "drop-b"):
        write_skill(root, name)
    (root / ".ignore").write_text("# comment\ndrop-*/\n!drop-b/\n")
    assert rels(walk_root(SkillRoot(root, "user", "t")), root) == ["drop-b/SKILL.md", "keep/SKILL.md"]


def test_symlinks_followed_duplicates_once_loops_cut(tmp_path):
    root = tmp_path / "skills"
    target = write_skill(tmp_path / "elsewhere", "linked").parent
    (root).mkdir()
    os.symlink(target, root / "linked")
    os.symlink(target, root / "linked-again")
    os.symlink(root, root / "loop")  # a loop back to the root
    os.symlink(tmp_path / "nowhere", root / "broken")
    result = discover_skills([SkillRoot(root, "workspace", "t")])
    assert names(result) == ["linked"]
    assert result.skills[0].entry_file == root / "linked" / "SKILL.md"  # the first path it was reached by
    assert result.skills[0].diagnostics == []


def test_project_roots_walk_ancestors_up_to_git_root(tmp_path):
    repo = tmp_path / "repo"
    cwd = repo / "pkg" / "sub"
    cwd.mkdir(parents=True)
    (repo / ".git").mkdir()
    roots = project_roots(cwd)
    assert [str(r.path.relative_to(tmp_path)) for r in roots] == [
        "repo/pkg/sub/.neta/skills",
        "repo/pkg/sub/.agents/skills",
        "repo/pkg/.agents/skills",
        "repo/.agents/skills",
        "repo/pkg/sub/.pi/skills",
    ]
    assert all(r.scope == "project" for r in roots)
    assert [r.include_root_files for r in roots] == [True, False, False, False, True]


def test_precedence_and_collisions_across_scopes(tmp_path):
    cwd = tmp_path / "proj"
    (cwd / ".git").mkdir(parents=True)
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    write_skill(cwd / ".pi" / "skills", "shared", description="from project .pi")
    write_skill(cwd / ".neta" / "skills", "shared", description="from project .neta")
    write_skill(ws, "shared", description="from workspace")
    write_skill(ws, "ws-only")
    write_skill(home / ".neta" / "skills", "shared", description="from user")
    write_skill(home / ".agents" / "skills", "user-only")
    roots = default_roots(cwd=cwd, home=home, workspace_dirs=[str(ws), str(tmp_path / "missing")])
    result = discover_skills(roots)
    active = {s.name: s for s in result.skills if s.status == "active"}
    assert active["shared"].description == "from project .neta"
    assert active["shared"].scope == "project"
    assert active["ws-only"].scope == "workspace" and active["user-only"].scope == "user"
    shadowed = [s for s in result.skills if s.status == "shadowed"]
    assert [(s.scope, s.description) for s in shadowed] == [
        ("project", "from project .pi"),
        ("workspace", "from workspace"),
        ("user", "from user"),
    ]
    for s in shadowed:
        (diag,) = s.diagnostics
        assert diag.code == "collision" and diag.extra["winner_path"] == str(active["shared"].entry_file)
    assert [d.code for d in result.diagnostics] == ["root-missing"]
    assert "NETA_SKILLS_DIRS[1]" in result.diagnostics[0].message


def test_invalid_skill_does_not_take_the_name(tmp_path):
    high = tmp_path / "high"
    low = tmp_path / "low"
    write_skill(high, "tool", description=None)  # no description: invalid
    write_skill(low, "tool")
    result = discover_skills([SkillRoot(high, "project", "h"), SkillRoot(low, "user", "l")])
    assert [(s.scope, s.status) for s in result.skills] == [("project", "invalid"), ("user", "active")]


def test_unreadable_and_oversized_files_are_invalid_not_fatal(tmp_path):
    root = tmp_path / "skills"
    write_skill(root, "big", body="x" * 5000)
    (root / "binary").mkdir()
    (root / "binary" / "SKILL.md").write_bytes(b"---\nname: binary\ndescription: \xff\xfe\n---\n")
    result = discover_skills([SkillRoot(root, "user", "t")], max_entry_bytes=2048)
    by_name = {s.name: s for s in result.skills}
    assert [d.code for d in by_name["big"].diagnostics] == ["file-too-large"]
    assert by_name["big"].status == "invalid"
    assert [d.code for d in by_name["binary"].diagnostics] == ["file-not-utf8"]
    assert by_name["binary"].status == "invalid"
    lenient = discover_skills([SkillRoot(root, "user", "t")], mode="pi")
    assert {s.name: s.status for s in lenient.skills}["binary"] == "active"


def test_fingerprint_covers_all_files_and_records_links(tmp_path):
    root = tmp_path / "skills"
    write_skill(root, "fp", files={"scripts/run.sh": "echo 1\n", "ref.md": "ref"})
    first = discover_skills([SkillRoot(root, "user", "t")]).skills[0]
    assert [f.path for f in first.contents.files] == ["SKILL.md", "ref.md", "scripts/run.sh"]
    (root / "fp" / "scripts" / "run.sh").write_text("echo 2\n")
    second = discover_skills([SkillRoot(root, "user", "t")]).skills[0]
    assert second.contents.fingerprint != first.contents.fingerprint
    (tmp_path / "outside.txt").write_text("secret")
    os.symlink(tmp_path / "outside.txt", root / "fp" / "link")
    third = discover_skills([SkillRoot(root, "user", "t")]).skills[0]
    link = [f for f in third.contents.files if f.path == "link"][0]
    assert link.kind == "symlink" and link.target == str(tmp_path / "outside.txt") and link.sha256 == ""
    assert third.contents.fingerprint != second.contents.fingerprint
    # the fingerprint does not depend on where the skill lives
    copy_root = tmp_path / "copy"
    write_skill(copy_root, "fp", files={"scripts/run.sh": "echo 2\n", "ref.md": "ref"})
    assert discover_skills([SkillRoot(copy_root, "user", "t")]).skills[0].contents.fingerprint == second.contents.fingerprint
