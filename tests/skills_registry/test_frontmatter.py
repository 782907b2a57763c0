"""Frontmatter split (Pi's rules), YAML 1.2 parsing, and validation codes in both modes."""

from __future__ import annotations

import pytest

from skills_registry.diagnostics import CODES, severity_for
from skills_registry.frontmatter import (
    parse_skill_text,
    split_frontmatter,
    strip_frontmatter,
)


def parse(text: str, folder: str = "my-skill", mode: str = "strict"):
    return parse_skill_text(text, parent_dir_name=folder, path=f"/x/{folder}/SKILL.md", mode=mode)


def codes(parsed) -> list[str]:
    return [d.code for d in parsed.diagnostics]


def test_split_follows_pi():
    doc = split_frontmatter("---\r\nname: a\r\n---\r\n\r\n  Body line\r\n\r\n")
    assert doc.yaml_text == "name: a"
    assert doc.body == "Body line"
    assert split_frontmatter("# no frontmatter\n").yaml_text is None
    # the frontmatter ends at the first "\n---", even inside a value
    assert split_frontmatter("---\na: |\n  x\n---y\n---\nrest").yaml_text == "a: |\n  x"
    unterminated = split_frontmatter("---\nname: a\nno end")
    assert unterminated.yaml_text is None and unterminated.unterminated
    assert strip_frontmatter("---\nname: a\n---\n\nHello\n") == "Hello"
    assert strip_frontmatter("  Plain\n") == "Plain"


def test_valid_skill_keeps_other_fields_in_metadata():
    parsed = parse(
        "---\nname: my-skill\ndescription: Does things.\nlicense: MIT\nallowed-tools: bash read\n"
        "metadata:\n  author: me\n  version: '2.1'\ndisable-model-invocation: true\n---\nBody\n"
    )
    assert parsed.valid and parsed.diagnostics == []
    assert parsed.name == "my-skill"
    assert parsed.description == "Does things."
    assert parsed.disable_model_invocation is True
    assert parsed.version == "2.1"
    assert parsed.metadata == {"license": "MIT", "allowed-tools": "bash read", "metadata": {"author": "me", "version": "2.1"}}


def test_top_level_version_wins_over_metadata_version():
    parsed = parse("---\ndescription: d\nversion: 3\nmetadata:\n  version: '1'\n---\n")
    assert parsed.version == "3"


def test_yaml_1_2_scalars_not_yaml_1_1():
    parsed = parse(
        "---\ndescription: yes\ncountry: NO\nwhen: 2024-01-02\noctal: 012\nswitch: on\nhex: 0x1F\n---\n"
    )
    # YAML 1.1 (PyYAML's default) would make these booleans, a date and octal 10.
    assert parsed.description == "yes"
    assert parsed.metadata == {"country": "NO", "when": "2024-01-02", "octal": 12, "switch": "on", "hex": 31}
    assert parsed.valid


def test_duplicate_keys_are_an_error():
    parsed = parse("---\nname: my-skill\ndescription: a\ndescription: b\n---\n")
    assert codes(parsed) == ["yaml-duplicate-key"]
    assert not parsed.valid


def test_yaml_error_names_line_and_column():
    parsed = parse("---\nname: my-skill\ndescription: [unclosed\n---\n")
    assert codes(parsed) == ["yaml-invalid"]
    assert "line" in parsed.diagnostics[0].message and "column" in parsed.diagnostics[0].message


def test_alias_bomb_is_refused_not_expanded():
    lines = ["---", "description: d", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    lines.append("---")
    parsed = parse("\n".join(lines) + "\n")
    assert codes(parsed) == ["frontmatter-too-complex"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("---\n- a\n- b\n---\n", ["frontmatter-not-mapping"]),
        ("---\nname: my-skill\n---\n", ["description-missing"]),
        ("---\nname: my-skill\ndescription: '   '\n---\n", ["description-missing"]),
        ("---\nname: my-skill\ndescription: 42\n---\n", ["description-not-string"]),
        ("---\nname: 7\ndescription: d\n---\n", ["name-not-string"]),
        ("---\nname: other\ndescription: d\n---\n", ["name-mismatch"]),
        ("---\nname: my-skill\ndescription: d\ndisable-model-invocation: 'yes'\n---\n", ["field-invalid"]),
        ("---\nname: my-skill\ndescription: d\nversion: [1]\n---\n", ["field-invalid"]),
        ("---\nname: my-skill\ndescription: d\n", ["frontmatter-unterminated", "description-missing"]),
        ("# Title only\n", ["description-missing"]),
    ],
)
def test_problem_codes(text, expected):
    assert codes(parse(text)) == expected


def test_name_rules_in_both_modes():
    cases = {
        "Bad_Name": ["name-invalid-chars"],
        "-edge": ["name-hyphen-edge"],
        "edge-": ["name-hyphen-edge"],
        "a--b": ["name-consecutive-hyphens"],
        "x" * 65: ["name-too-long"],
    }
    for name, expected in cases.items():
        strict = parse(f"---\nname: {name}\ndescription: d\n---\n", folder=name)
        assert codes(strict) == expected, name
        assert not strict.valid, name
        lenient = parse(f"---\nname: {name}\ndescription: d\n---\n", folder=name, mode="pi")
        assert codes(lenient) == expected and lenient.valid, name


def test_description_length_limit():
    ok = parse("---\ndescription: " + "d" * 1024 + "\n---\n")
    assert ok.valid
    long = parse("---\ndescription: " + "d" * 1025 + "\n---\n")
    assert codes(long) == ["description-too-long"]
    assert long.diagnostics[0].message == "description exceeds 1024 characters (1025)"
    assert not long.valid
    assert parse("---\ndescription: " + "d" * 1025 + "\n---\n", mode="pi").valid


def test_missing_name_falls_back_to_folder():
    parsed = parse("---\ndescription: d\n---\n", folder="from-folder")
    assert parsed.name == "from-folder" and parsed.valid


def test_severity_table_is_consistent():
    for code, spec in CODES.items():
        assert severity_for(code, "strict") in ("error", "warning")
        if not spec.pi_loads:
            # what Pi refuses to load, Neta never loads either
            assert severity_for(code, "pi") == "error" and severity_for(code, "strict") == "error", code
