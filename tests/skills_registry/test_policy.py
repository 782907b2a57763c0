"""The skill policy dict: validation with errors naming the field, round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skills_registry.policy import SkillPolicy, SkillPolicyError


def test_defaults():
    policy = SkillPolicy.from_dict({})
    assert policy.allowed == "all" and policy.subagent_allowed == ()
    assert SkillPolicy.from_dict(None) == policy
    assert policy.name_allowed("x", for_subagent=False)[0]
    assert not policy.name_allowed("x", for_subagent=True)[0]  # no subagent skills unless whitelisted


def test_round_trip():
    data = {
        "allowed": ["a", "b"],
        "subagent_allowed": ["a"],
        "include": ["b"],
        "exclude": ["a"],
        "index_budget_chars": 2000,
        "index_budget_tokens": None,
    }
    assert SkillPolicy.from_dict(data).to_dict() == data


@pytest.mark.parametrize(
    "data, field",
    [
        ({"allowed": "some"}, "allowed"),
        ({"allowed": 3}, "allowed"),
        ({"allowed": ["a", ""]}, "allowed[1]"),
        ({"allowed": ["a", "a"]}, "allowed[1]"),
        ({"subagent_allowed": "a"}, "subagent_allowed"),
        ({"include": [1]}, "include[0]"),
        ({"include": ["a"], "exclude": ["a"]}, "include"),
        ({"index_budget_chars": 0}, "index_budget_chars"),
        ({"index_budget_chars": "100"}, "index_budget_chars"),
        ({"index_budget_tokens": True}, "index_budget_tokens"),
        ({"budget": 100}, "budget"),
        ([], "(policy)"),
    ],
)
def test_errors_name_the_field(data, field):
    with pytest.raises(SkillPolicyError) as info:
        SkillPolicy.from_dict(data)
    assert info.value.field == field
    assert field in str(info.value)


def test_subagent_needs_both_lists():
    policy = SkillPolicy.from_dict({"allowed": ["a"], "subagent_allowed": ["a", "b"]})
    assert policy.name_allowed("a", for_subagent=True)[0]
    allowed, reason = policy.name_allowed("b", for_subagent=True)
    assert not allowed and "allowed skills" in reason


names = st.lists(st.text(alphabet="abc-", min_size=1, max_size=5), unique=True, max_size=5)


@given(allowed=st.one_of(st.just("all"), names), sub=names, inc=names, budget=st.one_of(st.none(), st.integers(1, 10**6)))
def test_round_trip_property(allowed, sub, inc, budget):
    data = {"allowed": allowed, "subagent_allowed": sub, "include": inc, "index_budget_chars": budget}
    policy = SkillPolicy.from_dict(data)
    assert SkillPolicy.from_dict(policy.to_dict()) == policy
