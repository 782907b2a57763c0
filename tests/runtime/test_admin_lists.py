"""Console list pages never load blobs, and their query count does not grow with the rows.

For every list page: rows whose text/JSON columns hold megabytes, the page loaded
as a superuser, every SQL statement it ran captured. No statement may select a
text, JSON or binary column of the listed model or of a model it points to
(unless the list shows a summary of it), and 50 rows cost as many queries as 5.
The change pages, which need the blobs, still show them.
"""

from __future__ import annotations

import itertools
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runtime.api.tokens import api_token_create
from runtime.models import Agent, AgentRun, ApiToken, ModelConfig, RunInput, SubprocessRun
from sessions_tree.models import AgentSession, SessionEntry, SessionEvent
from skills_registry.models import SkillResource
from toolcatalog.models import ToolConfig

MB = 1024 * 1024
BIG = "b" * (2 * MB)  # one multi-MB value per blob column of the first rows
BIG_ROWS = 2
BLOB_TYPES = {"TextField", "JSONField", "BinaryField"}
counter = itertools.count()


def big(i: int, small: str = "x") -> str:
    return BIG if i < BIG_ROWS else small


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def client_as_admin(client, admin_user):
    client.force_login(admin_user)
    return client


def heavy_model(i: int) -> ModelConfig:
    return ModelConfig.objects.create(
        name=f"m{next(counter)}", provider_kind="scripted", provider_name="scripted", model_id="s",
        options={"pad": big(i)},
    )


def heavy_agent(i: int) -> Agent:
    return Agent.objects.create(
        name=f"a{next(counter)}", model=heavy_model(i), description=big(i), system_prompt=big(i),
        workspace_roots=[big(i)],
    )


def heavy_session(i: int, user=None) -> AgentSession:
    n = next(counter)
    return AgentSession.objects.create(
        session_id=f"s{n}", header=big(i, "{}"), cwd=big(i), session_file=big(i), user=user, title=f"t{n}",
        metadata={"pad": big(i)}, in_flight_payload=big(i), diagnostics={"pad": big(i)} if i % 2 else {},
    )


def rows_session() -> AgentSession:
    """The one heavy session the entries and events belong to (their lists join it)."""
    existing = AgentSession.objects.filter(session_id="rows-session").first()
    return existing or AgentSession.objects.create(
        session_id="rows-session", header=BIG, cwd=BIG, session_file=BIG, metadata={"pad": BIG},
        in_flight_payload=BIG, diagnostics={"pad": BIG},
    )


def make_runs(start, stop, user):
    agent = heavy_agent(0)
    statuses = ["queued", "running", "completed", "failed", "lost", "aborted"]
    for i in range(start, stop):
        run = AgentRun.objects.create(
            session_id=f"r{i}", agent=agent, user=user if i % 2 else None, status=statuses[i % len(statuses)],
            prompt=big(i), images=[{"data": big(i)}], error=big(i), input_tokens=i, cost=i,
            cancelled_by=user if i % 3 == 0 else None,
        )
        if i % 4 == 0:
            SubprocessRun.objects.create(
                session_id=run.session_id, batch_id="b", parent_run=run, tool_call_id="c", task_index=0, mode="single",
                agent=agent.name, task=big(i), final_text=big(i), usage={"pad": big(i)},
            )


def make_subprocess_runs(start, stop, user):
    make_runs(4 * start, 4 * stop, user)  # one child in four runs


def make_tokens(start, stop, user):
    for i in range(start, stop):
        api_token_create(user=user, name=f"token {i}")


def make_sessions(start, stop, user):
    for i in range(start, stop):
        heavy_session(i, user=user)


def make_entries(start, stop, user):
    session = rows_session()
    for i in range(start, stop):
        SessionEntry.objects.create(session=session, entry_id=f"e{i}", seq=i, type="message", role="user", payload=big(i, "{}"))


def make_events(start, stop, user):
    session = rows_session()
    for i in range(start, stop):
        SessionEvent.objects.create(session=session, revision=i + 1, type="entry_appended", payload=big(i, "{}"))


def make_skills(start, stop, user):
    for i in range(start, stop):
        SkillResource.objects.create(
            path_key=f"k{next(counter)}", name=f"skill-{i}", description=big(i), scope="workspace", fingerprint="f" * 64,
            source_info={"pad": big(i)}, entry_file=big(i), base_dir=big(i), status="active",
            diagnostics=[{"code": "x", "severity": "warning"}], metadata={"pad": big(i)}, files=[big(i)],
            last_seen_at=timezone.now(),
        )


def make_tools(start, stop, user):
    for i in range(start, stop):
        ToolConfig.objects.create(name=f"tool-{i}", description_override=big(i), prompt_hint=big(i))


def make_agents(start, stop, user):
    for i in range(start, stop):
        heavy_agent(i)


def make_models(start, stop, user):
    for i in range(start, stop):
        heavy_model(i)


def make_users(start, stop, user):
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name="list-group")
    group.permissions.set(Permission.objects.filter(codename__startswith="view_")[:5])
    for i in range(start, stop):
        made = type(user).objects.create_user(f"user-{i}", is_staff=i % 2 == 0)
        made.groups.add(group)


def make_groups(start, stop, user):
    from django.contrib.auth.models import Group, Permission

    for i in range(start, stop):
        Group.objects.create(name=f"group-{i}").permissions.set(Permission.objects.filter(codename__startswith="view_")[:3])


def make_audit(start, stop, user):
    from audit.models import AuditEntry

    for i in range(start, stop):
        AuditEntry.objects.create(
            actor=user, actor_name=user.username, action="agent.change", target_type="runtime.agent", target_id=str(i),
            before={"pad": big(i)}, after={"pad": big(i)}, via="console",
        )  # fmt: skip


# (changelist url name, listed model, rows maker, blob columns the list shows a summary of)
PAGES = [
    ("admin:runtime_agentrun_changelist", AgentRun, make_runs, ()),
    ("admin:runtime_apitoken_changelist", ApiToken, make_tokens, ()),
    ("admin:sessions_tree_agentsession_changelist", AgentSession, make_sessions, ()),
    ("admin:sessions_tree_sessionentry_changelist", SessionEntry, make_entries, ()),
    ("admin:sessions_tree_sessionevent_changelist", SessionEvent, make_events, ()),
    ("admin:skills_registry_skillresource_changelist", SkillResource, make_skills, ("diagnostics",)),
    ("admin:toolcatalog_toolconfig_changelist", ToolConfig, make_tools, ()),
    ("admin:runtime_agent_changelist", Agent, make_agents, ("tool_policy", "skill_policy", "subagent_policy")),  # the counts
    ("admin:runtime_modelconfig_changelist", ModelConfig, make_models, ()),
    ("admin:runtime_subprocessrun_changelist", SubprocessRun, make_subprocess_runs, ()),
    ("admin:audit_auditentry_changelist", "audit.AuditEntry", make_audit, ()),
    ("admin:auth_user_changelist", "auth.User", make_users, ()),
    ("admin:auth_group_changelist", "auth.Group", make_groups, ()),
    # The console's own pages: the overview over runs, the tools catalog over agents, access over agents and staff.
    ("admin:index", AgentRun, make_runs, ()),
    ("admin:console_tools", Agent, make_agents, ("tool_policy", "subagent_policy")),  # what it resolves
    ("admin:console_access", "auth.User", make_users, ()),
]


def blob_columns(model, shown=()) -> set[str]:
    """``table.column`` of the blob columns of ``model`` and of every model it points to."""
    columns = set()
    models = [(model, set(shown))] + [
        (f.related_model, set()) for f in model._meta.concrete_fields if f.is_relation and f.related_model
    ]
    for m, allowed in models:
        for f in m._meta.concrete_fields:
            if f.get_internal_type() in BLOB_TYPES and f.name not in allowed:
                columns.add(f"{m._meta.db_table}.{f.column}")
    return columns


def _top_level_items(select_list: str) -> list[str]:
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(select_list):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(select_list[start:i])
            start = i + 1
    items.append(select_list[start:])
    return [item.strip() for item in items]


def selected_columns(sql: str) -> set[str]:
    """The bare ``table.column`` items a SELECT returns (an expression over a column returns no blob)."""
    sql = sql.replace("`", '"')
    if not sql.lstrip().upper().startswith("SELECT"):
        return set()
    head = sql.lstrip()[len("SELECT"):]
    head = re.sub(r"^\s*DISTINCT\s", " ", head, flags=re.I)
    select_list = head.split(" FROM ", 1)[0]
    found = set()
    for item in _top_level_items(select_list):
        match = re.fullmatch(r'"([^"]+)"\."([^"]+)"(?:\s+AS\s+"?[\w]+"?)?', item, flags=re.I)
        if match:
            found.add(f"{match.group(1)}.{match.group(2)}")
    return found


def load(client, url, contains: str | None = None) -> CaptureQueriesContext:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    if contains is not None:
        assert contains in response.content.decode()
    return queries


@pytest.mark.django_db
@pytest.mark.parametrize("url_name, model, make_rows, shown", PAGES, ids=[p[0].split(":")[1] for p in PAGES])
def test_list_page_loads_no_blob_and_a_constant_number_of_queries(client_as_admin, admin_user, url_name, model, make_rows, shown):
    from django.apps import apps

    model = apps.get_model(model) if isinstance(model, str) else model
    url = reverse(url_name)
    make_rows(0, 5, admin_user)
    assert model.objects.count() >= 5
    five = load(client_as_admin, url)
    blobs = blob_columns(model, shown)
    loaded = {column for q in five.captured_queries for column in selected_columns(q["sql"]) if column in blobs}
    assert loaded == set(), f"{url_name} selects {sorted(loaded)}"
    # The page did list the rows (a query over the model's table ran).
    assert any(f'{model._meta.db_table}' in q["sql"] for q in five.captured_queries)

    make_rows(5, 50, admin_user)
    fifty = load(client_as_admin, url)
    assert len(fifty.captured_queries) == len(five.captured_queries), [q["sql"][:200] for q in fifty.captured_queries]


@pytest.mark.django_db
def test_run_page_loads_no_images_of_its_queued_inputs(client_as_admin, admin_user):
    make_runs(0, 1, admin_user)
    run = AgentRun.objects.get()
    for i in range(3):
        RunInput.objects.create(run=run, text=f"follow-up {i}", images=[{"data": BIG}])
    queries = load(client_as_admin, reverse("admin:runtime_agentrun_change", args=[run.pk]), contains="follow-up 2")
    selected = set().union(*(selected_columns(q["sql"]) for q in queries.captured_queries))
    assert "runtime_runinput.text" in selected  # the inline read the inputs
    assert "runtime_runinput.images" not in selected
    assert "runtime_agentrun.prompt" in selected  # the run's own page shows its prompt


@pytest.mark.django_db
def test_change_pages_still_show_the_blobs(client_as_admin, admin_user):
    session = heavy_session(1)
    entry = SessionEntry.objects.create(session=session, entry_id="e1", seq=1, type="message", payload='{"marker": "entry-payload-marker"}')
    page = client_as_admin.get(reverse("admin:sessions_tree_sessionentry_change", args=[entry.pk]))
    assert page.status_code == 200 and "entry-payload-marker" in page.content.decode()
    event = SessionEvent.objects.create(session=session, revision=1, type="x", payload='{"marker": "event-payload-marker"}')
    page = client_as_admin.get(reverse("admin:sessions_tree_sessionevent_change", args=[event.pk]))
    assert page.status_code == 200 and "event-payload-marker" in page.content.decode()


@pytest.mark.django_db
def test_the_session_list_still_says_which_sessions_have_diagnostics(client_as_admin, admin_user):
    with_diagnostics = heavy_session(1)  # odd: diagnostics set
    without = heavy_session(2)
    page = client_as_admin.get(reverse("admin:sessions_tree_agentsession_changelist")).content.decode()

    def row(meta):
        start = page.index(f">{meta.title}<") if f">{meta.title}<" in page else page.index(meta.session_id)
        return page[start: page.index("</tr>", start)]

    assert 'pill-warn">yes<' in row(with_diagnostics)
    assert 'pill-warn' not in row(without)


def test_the_sql_reader_tells_columns_from_expressions():
    sql = 'SELECT "t"."id", "t"."header", CASE WHEN "t"."diagnostics" = \'{}\' THEN 0 ELSE 1 END AS "x" FROM "t"'
    assert selected_columns(sql) == {"t.id", "t.header"}
    assert selected_columns("SELECT `t`.`a`, COUNT(*) FROM `t`") == {"t.a"}
