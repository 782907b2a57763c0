"""Neta's discovery against Pi's own loader (``../shared/pi-oracle``).

In ``pi`` validation mode Neta must load the same skills, report the same
diagnostics (by kind, path and, except for YAML parser wording, message) and
build the same prompt block, byte for byte. In ``strict`` mode every skill Pi
only warns about is ``invalid`` instead, and the diagnostics are the same.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from skills_registry.discovery import SkillRoot, discover_skills
from skills_registry.prompt_index import format_skill_index
from tests.support.services import FIXTURES
from tests.support.skills import write_skill

SKILLS = FIXTURES / "skills"
EXPECTED = FIXTURES / "skills.expected.json"


def neta_view(roots: list[SkillRoot], base: Path, mode: str) -> dict:
    """Neta's discovery in the shape skills.mjs prints (paths relative to ``base``)."""
    result = discover_skills(roots, mode=mode)
    rel = lambda p: os.path.relpath(p, base).replace(os.sep, "/")  # noqa: E731
    active = [s for s in result.skills if s.status == "active"]
    prompt = format_skill_index(active).text.replace(f"{base}{os.sep}", "")
    diagnostics = []
    for d in result.all_diagnostics():
        if d.pi_kind is None:
            continue  # a check Pi does not make
        message = "<yaml>" if d.code in ("yaml-invalid", "yaml-duplicate-key") else d.pi_message
        diagnostics.append((d.pi_kind, rel(d.path), message))
    return {
        "skills": [
            {
                "name": s.name,
                "description": s.description,
                "filePath": rel(s.entry_file),
                "baseDir": rel(s.base_dir),
                "disableModelInvocation": s.disable_model_invocation,
            }
            for s in active
        ],
        "diagnostics": Counter(diagnostics),
        "prompt": prompt,
        "result": result,
    }


def pi_view(expected: dict, *, duplicates: tuple[str, ...] = ()) -> dict:
    """Pi's output as comparable data.

    ``duplicates``: skill files Pi reaches a second time through a symlink. Pi
    validates such a file under its second path (and may warn about it) before
    dropping it as a duplicate; Neta drops it before validating, so those
    warnings are left out of the comparison.
    """
    diagnostics = []
    for d in expected["diagnostics"]:
        if d["path"] in duplicates:
            continue
        message = d["message"]
        if d["type"] == "warning" and ("line" in message and "column" in message or "Map keys" in message):
            message = "<yaml>"  # js-yaml's wording; Neta reports PyYAML's
        diagnostics.append((d["type"], d["path"], message))
    return {"skills": expected["skills"], "diagnostics": Counter(diagnostics), "prompt": expected["prompt"]}


def fixture_roots(base: Path) -> list[SkillRoot]:
    return [SkillRoot(base / "project", "project", ".pi/skills"), SkillRoot(base / "user", "user", "~/.neta/skills")]


def test_fixture_matches_pi_in_pi_mode():
    expected = json.loads(EXPECTED.read_text())
    ours = neta_view(fixture_roots(SKILLS), SKILLS, "pi")
    theirs = pi_view(expected)
    assert ours["skills"] == theirs["skills"]
    assert ours["diagnostics"] == theirs["diagnostics"]
    assert ours["prompt"] == theirs["prompt"]
    # the collision names winner and loser like Pi does
    (collision,) = [d for d in ours["result"].all_diagnostics() if d.code == "collision"]
    (pi_collision,) = [d for d in expected["diagnostics"] if d["type"] == "collision"]
    assert os.path.relpath(collision.extra["winner_path"], SKILLS) == pi_collision["collision"]["winnerPath"]
    assert os.path.relpath(collision.extra["loser_path"], SKILLS) == pi_collision["collision"]["loserPath"]


def test_fixture_in_strict_mode_invalidates_what_pi_only_warns_about():
    expected = json.loads(EXPECTED.read_text())
    ours = neta_view(fixture_roots(SKILLS), SKILLS, "strict")
    warned = {d["path"] for d in expected["diagnostics"] if d["type"] == "warning"}
    pi_clean = [s for s in expected["skills"] if s["filePath"] not in warned]
    assert ours["skills"] == pi_clean
    assert ours["diagnostics"] == pi_view(expected)["diagnostics"]  # same findings, stricter outcome
    invalid = sorted(os.path.relpath(s.entry_file, SKILLS) for s in ours["result"].skills if s.status == "invalid")
    assert invalid == sorted(
        {d["path"] for d in expected["diagnostics"] if d["type"] == "warning"}
    )


def _run_oracle(oracle: Path, base: Path, *roots: Path) -> dict:
    proc = subprocess.run(
        [str(oracle), "skills", "--base", str(base), *map(str, roots)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.oracle
def test_oracle_reproduces_the_stored_fixture(oracle):
    live = _run_oracle(oracle, SKILLS, SKILLS / "project", SKILLS / "user")
    assert live == json.loads(EXPECTED.read_text())


@pytest.mark.oracle
def test_edge_cases_match_pi_live(oracle, tmp_path):
    base = tmp_path
    first = base / "first"
    second = base / "second"
    write_skill(first, "yaml-date", description="2024-01-02")  # YAML 1.2: a string, not a date
    write_skill(first, "yaml-yes", description="yes")
    write_skill(first, "dmi-yes", extra="disable-model-invocation: yes")  # not `true`: still listed
    write_skill(first, "dup-keys", extra="description: again")
    write_skill(first, "crlf")
    crlf = first / "crlf" / "SKILL.md"
    crlf.write_bytes(crlf.read_bytes().replace(b"\n", b"\r\n"))
    (first / "empty-fm").mkdir()
    (first / "empty-fm" / "SKILL.md").write_text("---\n---\nBody\n")
    (first / "bom").mkdir()
    (first / "bom" / "SKILL.md").write_text("\ufeff---\nname: bom\ndescription: d\n---\n")
    write_skill(first, "nested/inner", files={"deeper/SKILL.md": "---\ndescription: never\n---\n"})
    write_skill(first, "nested/ignored")
    (first / "nested" / ".gitignore").write_text("ignored\n")
    write_skill(first, "node_modules/dep")
    write_skill(first, "-bad-")
    write_skill(first, "amp", description="'Tom & Jerry <b> \"quoted\"'")
    (first / "UPPER.MD").write_text("---\ndescription: not .md\n---\n")
    (first / "top.md").write_text("---\ndescription: loose\n---\n")
    os.symlink(first / "crlf", first / "zz-crlf-link")  # same file again: loaded once
    write_skill(second, "yaml-yes", description="loses the collision")
    write_skill(second, "second-only", name=False)
    expected = _run_oracle(oracle, base, first, second)
    roots = [SkillRoot(first, "project", "p"), SkillRoot(second, "user", "u")]
    ours = neta_view(roots, base, "pi")
    theirs = pi_view(expected, duplicates=("first/zz-crlf-link/SKILL.md",))
    assert ours["skills"] == theirs["skills"]
    assert ours["diagnostics"] == theirs["diagnostics"]
    assert ours["prompt"] == theirs["prompt"]
    assert len(ours["skills"]) >= 8 and sum(ours["diagnostics"].values()) >= 5  # the case list did its job
