"""The <available_skills> block: Pi's shape, budgets, include/exclude, determinism."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skills_registry.prompt_index import (
    IndexEntry,
    estimate_text_tokens,
    format_skill_index,
)


def generated(n: int, seed: int = 7) -> list[IndexEntry]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(["lint", "deploy", "parse", "render", "test", "<x>", "&", "docs"]) for _ in range(rng.randint(3, 12)))
        out.append(IndexEntry(f"skill-{i:03d}", f"Skill {i}: {words}.", f"/srv/skills/skill-{i:03d}/SKILL.md"))
    return out


def listed_names(text: str) -> list[str]:
    return re.findall(r"<name>(.*?)</name>", text)


def test_unbudgeted_block_is_pi_shape():
    idx = format_skill_index([IndexEntry("a", "Uses <b> & 'q'", "/s/a/SKILL.md")])
    assert idx.text == (
        "\n\nThe following skills provide specialized instructions for specific tasks.\n"
        "Use the read tool to load a skill's file when the task matches its description.\n"
        "When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md "
        "/ dirname of the path) and use that absolute path in tool commands.\n"
        "\n<available_skills>\n  <skill>\n    <name>a</name>\n"
        "    <description>Uses &lt;b&gt; &amp; &apos;q&apos;</description>\n"
        "    <location>/s/a/SKILL.md</location>\n  </skill>\n</available_skills>"
    )
    assert idx.listed == ("a",) and idx.omitted == ()


def test_no_skills_no_block():
    assert format_skill_index([]).text == ""


def test_read_skill_loader_names_the_tools():
    text = format_skill_index(generated(2), loader="read_skill").text
    assert "read_skill tool" in text and "read_skill_file(name, path)" in text
    assert "Use the read tool" not in text
    with pytest.raises(ValueError):
        format_skill_index(generated(1), loader="cat")


def test_200_skills_under_2000_chars():
    skills = generated(200)
    idx = format_skill_index(skills, budget_chars=2000)
    assert len(idx.text) <= 2000
    names = listed_names(idx.text)
    assert names == list(idx.listed) and len(names) > 0
    assert len(idx.omitted) == 200 - len(names)
    assert f"({len(idx.omitted)} more skills are available but not listed" in idx.text
    assert set(idx.listed) | set(idx.omitted) == {s.name for s in skills}
    # greedy packing: no omitted skill would still have fit (up to the note's digit reserve)
    def block(s):
        other = skills[1] if s is skills[0] else skills[0]
        return len(format_skill_index([other, s]).text) - len(format_skill_index([other]).text)

    by_name = {s.name: s for s in skills}
    assert all(len(idx.text) + block(by_name[name]) > 2000 - 3 for name in idx.omitted)


def test_budget_omits_in_order_and_reports_count_exactly():
    skills = [IndexEntry(f"s{i}", "d" * 50, f"/x/s{i}/SKILL.md") for i in range(10)]
    per_skill = len(format_skill_index(skills[:2]).text) - len(format_skill_index(skills[:1]).text)
    frame = len(format_skill_index(skills[:1]).text) - per_skill
    note = len("\n(7 more skills are available but not listed, to keep this list within its budget.)")
    budget = frame + 3 * per_skill + note + 5  # exactly three fit beside the note
    idx = format_skill_index(skills, budget_chars=budget)
    assert idx.listed == ("s0", "s1", "s2")
    assert idx.omitted == tuple(f"s{i}" for i in range(3, 10))
    assert idx.text.endswith("(7 more skills are available but not listed, to keep this list within its budget.)")
    assert len(idx.text) <= budget


def test_include_first_and_exclude_never():
    skills = generated(200)
    include = ["skill-150", "skill-007", "skill-199"]
    exclude = ["skill-000", "skill-001", "skill-150x"]
    idx = format_skill_index(skills, include=include, exclude=exclude, budget_chars=2000)
    assert list(idx.listed[:3]) == include
    assert "skill-000" not in idx.text and "skill-001" not in idx.text
    assert idx.excluded == ("skill-000", "skill-001")
    assert len(idx.listed) + len(idx.omitted) == 198  # excluded ones are neither listed nor counted
    assert len(idx.text) <= 2000


def test_token_budget():
    idx = format_skill_index(generated(200), budget_tokens=500)
    assert estimate_text_tokens(idx.text) <= 500 and idx.omitted
    both = format_skill_index(generated(200), budget_tokens=500, budget_chars=1500)
    assert len(both.text) <= 1500


def test_budget_too_small_for_the_frame_gives_no_block_but_says_so():
    idx = format_skill_index(generated(5), budget_chars=100)
    assert idx.text == "" and idx.listed == () and len(idx.omitted) == 5 and idx.notes


def test_disable_model_invocation_never_listed():
    class Row:
        def __init__(self, name, hidden):
            self.name, self.description, self.entry_file, self.disable_model_invocation = name, "d", f"/{name}", hidden

    idx = format_skill_index([Row("shown", False), Row("hidden", True)])
    assert idx.listed == ("shown",) and "hidden" not in idx.text


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=60),
    budget=st.integers(min_value=1, max_value=6000),
    seed=st.integers(min_value=0, max_value=10**6),
)
def test_budget_property(n, budget, seed):
    skills = generated(n, seed)
    idx = format_skill_index(skills, budget_chars=budget)
    assert len(idx.text) <= budget
    assert listed_names(idx.text) == list(idx.listed)
    assert len(idx.listed) + len(idx.omitted) == n
    order = [s.name for s in skills]
    assert list(idx.listed) == [name for name in order if name in set(idx.listed)]  # order kept
    if idx.omitted and idx.text:
        assert f"({len(idx.omitted)} more skill" in idx.text
    if not idx.omitted and n:
        assert "more skill" not in idx.text
    assert format_skill_index(skills, budget_chars=budget) == idx  # deterministic
