"""Usage and cost over a date range (``runtime/runs/usage.py``): grouped by user, agent, model
(the one each run recorded as answering, not the agent's model today) and day, sorted, as CSV;
``GET /api/usage/`` gives staff who read every session everyone's usage and others their own;
the console page draws the same report. Real runs of a scripted model where a run is needed."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from runtime.models import AgentRun, ModelConfig
from runtime.runs.usage import parse_query, usage_report
from tests.support.rules import rules

pytestmark = pytest.mark.django_db


def run(agent, user, *, day: dt.date, cost: str, answered: str = "", model_name: str = "", tokens=(100, 10)) -> AgentRun:
    created = dt.datetime.combine(day, dt.time(12), tzinfo=timezone.get_current_timezone())
    row = AgentRun.objects.create(
        session_id="s", agent=agent, user=user, status="completed", answered_model=answered, model_name=model_name,
        input_tokens=tokens[0], output_tokens=tokens[1], cost=Decimal(cost),
    )  # fmt: skip
    AgentRun.objects.filter(pk=row.pk).update(created_at=created)
    return row


@pytest.fixture
def usage_rows(make_agent, django_user_model):
    alice = django_user_model.objects.create_user("alice-u", password="pw")
    bob = django_user_model.objects.create_user("=bob", password="pw")  # a name a spreadsheet would run
    agent = make_agent(rules(), name="usage")
    other = make_agent(rules(), name="usage2")
    today = timezone.localdate()
    run(agent, alice, day=today, cost="0.50", answered="backup-llm")
    run(agent, alice, day=today - dt.timedelta(days=1), cost="0.25")  # from before runs recorded the model
    run(other, bob, day=today, cost="1.00", answered="usage2-model")
    run(other, bob, day=today - dt.timedelta(days=40), cost="9.00", answered="usage2-model")  # outside the default range
    return {"alice": alice, "bob": bob, "agent": agent, "today": today}


def keyed(report) -> dict:
    return {r["key"]: (r["runs"], r["cost"]) for r in report["rows"]}


def test_groups_and_totals_read_what_each_run_recorded(usage_rows):
    # The agent's model changes afterwards: a recorded run keeps its model, an older one follows the agent.
    usage_rows["agent"].model = ModelConfig.objects.get(name="usage2-model")
    usage_rows["agent"].save()
    by_model = usage_report(parse_query({}))
    assert keyed(by_model) == {"usage2-model": (2, "1.250000"), "backup-llm": (1, "0.500000")}
    assert by_model["totals"]["runs"] == 3 and by_model["totals"]["cost"] == "1.750000"
    assert [r["key"] for r in by_model["rows"]] == ["usage2-model", "backup-llm"]  # -cost by default
    assert keyed(usage_report(parse_query({"group_by": "agent"}))) == {"usage": (2, "0.750000"), "usage2": (1, "1.000000")}
    assert keyed(usage_report(parse_query({"group_by": "user", "sort": "key"}))) == {"=bob": (1, "1.000000"), "alice-u": (2, "0.750000")}
    days = usage_report(parse_query({"group_by": "day"}))
    assert [r["key"] for r in days["rows"]] == [(usage_rows["today"] - dt.timedelta(days=1)).isoformat(), usage_rows["today"].isoformat()]
    wide = usage_report(parse_query({"from": (usage_rows["today"] - dt.timedelta(days=60)).isoformat()}))
    assert wide["totals"]["runs"] == 4
    assert usage_report(parse_query({}), user=usage_rows["alice"])["totals"]["runs"] == 2


@pytest.mark.parametrize(
    "params, field",
    [({"from": "yesterday"}, "from"), ({"to": "2026-13-01"}, "to"), ({"from": "2026-02-01", "to": "2026-01-01"}, "from"),
     ({"from": "2020-01-01", "to": "2026-01-01"}, "from"), ({"group_by": "tool"}, "group_by"), ({"sort": "-name"}, "sort")],
)  # fmt: skip
def test_bad_queries_name_the_parameter(usage_rows, params, field):
    client = APIClient()
    client.force_authenticate(usage_rows["alice"])
    response = client.get("/api/usage/", params)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_the_api_gives_staff_everyones_usage_and_others_their_own(usage_rows, django_user_model):
    client = APIClient()
    client.force_authenticate(usage_rows["alice"])
    own = client.get("/api/usage/", {"group_by": "user"}).json()
    assert keyed(own) == {"alice-u": (2, "0.750000")}
    assert client.get("/api/usage/", {"user": "=bob"}).status_code == 400
    staff = django_user_model.objects.create_user("auditor", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_agentsession"), Permission.objects.get(codename="view_agentrun"))
    client.force_authenticate(django_user_model.objects.get(pk=staff.pk))
    everyone = client.get("/api/usage/", {"group_by": "user"}).json()
    assert set(keyed(everyone)) == {"alice-u", "=bob"}
    assert keyed(client.get("/api/usage/", {"group_by": "user", "user": "=bob"}).json()) == {"=bob": (1, "1.000000")}
    download = client.get("/api/usage/", {"group_by": "user", "as": "csv"})
    assert download.status_code == 200 and download["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(download.content.decode())))
    assert lines[0][0] == "user" and lines[-1][0] == "total"
    assert ["'=bob", "1", "100", "10", "0", "0", "1.000000"] in lines  # never a formula


def test_the_console_page_draws_the_report(usage_rows, admin_client):
    page = admin_client.get("/admin/console/usage/", {"group_by": "agent"})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-key="usage2"' in text and "<svg" in text and "$1.750000" in text
    assert admin_client.get("/admin/console/usage/", {"group_by": "nope"}).status_code == 200  # says so, shows the default
    download = admin_client.get("/admin/console/usage/", {"group_by": "agent", "as": "csv"})
    assert download["Content-Disposition"].startswith('attachment; filename="usage-agent-')


def test_a_run_records_the_model_that_answered_and_its_first_token(driver_for):
    driver = driver_for(rules())
    done = driver.prompt("hello")
    assert done.answered_model == "tester-model"
    assert done.first_token_at is not None and done.started_at <= done.first_token_at <= done.finished_at
    row = AgentRun.objects.get(pk=done.pk)
    assert row.answered_model == "tester-model" and row.first_token_at == done.first_token_at
