"""MCP servers: a person with the MCP permissions runs no command of their choosing, and no
server — whoever configured it, whenever — reads the server's secrets or protected files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from tests.support.services import require
from toolcatalog import catalog_version
from toolcatalog.mcp import catalog as mcp_catalog
from toolcatalog.mcp import connections
from toolcatalog.models import McpServer
from toolcatalog.projection import resolve_tools
from toolcatalog.protected_paths import confined_protected
from toolcatalog.protocol import ToolContext
from toolcatalog.sandbox import bwrap_argv, bwrap_status, reset_sandbox_probe
from toolcatalog.services import mcp_server_refresh, mcp_server_save, tool_execute

from tests.support.mcp_fixtures import SERVER  # the real MCP test server

from .security_support import PROVIDER_KEY, SECRET, logged_in

pytestmark = pytest.mark.django_db(transaction=True)

TESTS = SERVER.parents[1]
MCP_STAFF = ("toolcatalog.mcpserver:*",)


@pytest.fixture(autouse=True)
def fresh_connections():
    connections.reset_manager()
    mcp_catalog.forget()
    catalog_version.forget()
    yield
    connections.reset_manager()
    mcp_catalog.forget()
    catalog_version.forget()


@pytest.fixture
def marker(tmp_path):
    """A file the attacker's command would create: its absence proves no command ran."""
    return tmp_path / "command-ran"


def attack(marker: Path) -> dict:
    return {"transport": "stdio", "command": "/bin/sh", "args": ["-c", f"touch {marker}; sleep 5"], "agents": ["*"]}


def console_form(**fields) -> dict:
    data = {"transport": "stdio", "enabled": "on", "connect_timeout": "5", "call_timeout": "5", "agents": "*"}
    data.update(fields)
    return {key: "\n".join(value) if isinstance(value, list) else value for key, value in data.items()}


def test_mcp_staff_cannot_add_a_stdio_server(planted, account, marker):
    staff = account("mcp-staff", *MCP_STAFF)
    client = logged_in(staff)
    # The console's page: a new server can only be a streamable-HTTP one.
    page = client.get(reverse("admin:console_mcp_add")).content.decode()
    assert "superusers only" in page and 'value="stdio"' not in page
    answer = client.post(reverse("admin:console_mcp_add"), console_form(name="evil", **{k: v for k, v in attack(marker).items() if k != "agents"}))
    assert answer.status_code == 200 and not McpServer.objects.filter(name="evil").exists()
    # The raw admin: what a stdio server runs is read-only, and the service refuses the rest.
    answer = client.post(
        reverse("admin:toolcatalog_mcpserver_add"),
        {"name": "evil2", "transport": "stdio", "command": "/bin/sh", "args": '["-c", "touch x"]', "url": "", "env_names": "[]",
         "enabled": "on", "connect_timeout": "5", "call_timeout": "5", "agents": '["*"]', "read_only_paths": "[]"},
    )  # fmt: skip
    assert answer.status_code in (200, 403) and not McpServer.objects.filter(name="evil2").exists()
    # The service, whoever calls it.
    with pytest.raises(PermissionDenied, match="only a superuser"):
        mcp_server_save(actor=staff, name="evil3", discover=False, **attack(marker))
    assert not McpServer.objects.filter(name__startswith="evil").exists() and not marker.exists()


def test_mcp_staff_cannot_change_what_a_stdio_server_runs(planted, account, marker):
    root = account("root", superuser=True)
    mcp_server_save(actor=root, name="tools", discover=False, transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"], agents=["alpha"])
    staff = account("mcp-staff", *MCP_STAFF)
    for change in ({"command": "/bin/sh", "args": ["-c", f"touch {marker}"]}, {"env_names": ["HOME"]}, {"network": True}, {"read_only_paths": ["/tmp"]}, {"transport": "http", "command": "", "args": [], "url": "https://mcp.example.com/mcp"}):
        with pytest.raises(PermissionDenied):
            mcp_server_save(actor=staff, name="tools", discover=False, **change)
    # The console's page shows them disabled: a posted value is ignored.
    answer = logged_in(staff).post(
        reverse("admin:console_mcp_server", args=["tools"]),
        console_form(name="tools", command="/bin/sh", args=["-c", f"touch {marker}"], agents="alpha\nbeta"),
    )
    assert answer.status_code == 302
    row = McpServer.objects.get(name="tools")
    assert row.command == sys.executable and row.args == [str(SERVER), "stdio"] and row.agents == ["alpha", "beta"]  # who gets it: theirs
    mcp_server_refresh(actor=staff, name="tools")  # a refresh restarts what a superuser chose
    assert not marker.exists()


@pytest.mark.parametrize("name", ["NETA_SECRET_KEY", "NETA_DATABASE_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "NETA_SECRET_KEY_FILE", "ANTHROPIC_API_KEY"])
def test_env_names_never_hand_a_server_secret_or_a_provider_key_not_even_for_a_superuser(planted, account, name):
    with pytest.raises(ValidationError) as refused:
        mcp_server_save(actor=account("root", superuser=True), name="envy", discover=False, transport="stdio", command=sys.executable, env_names=[name])
    assert name in str(refused.value)
    assert not McpServer.objects.filter(name="envy").exists()


@pytest.mark.parametrize(
    "path",
    ["/", "/etc", "/etc/shadow", "/root", "/proc/1", "VAR", "VAR/sessions", "BASE", "PARENT"],
)
def test_read_only_paths_never_show_the_machine_or_the_servers_state(planted, account, path):
    var = str(django_settings.VAR_DIR)
    path = path.replace("VAR", var).replace("BASE", str(django_settings.BASE_DIR)).replace("PARENT", str(Path(var).parent.parent))
    with pytest.raises(ValidationError, match="read_only_paths"):
        mcp_server_save(actor=account("root", superuser=True), name="peek", discover=False, transport="stdio", command=sys.executable, read_only_paths=[path])


def test_an_http_servers_url_passes_the_web_guard(planted, account, canary, settings):
    client = logged_in(account("mcp-staff", *MCP_STAFF))
    for url in (canary.url + "/mcp", "http://169.254.169.254/mcp", "http://10.1.2.3/mcp", "http://localhost:6379/"):
        answer = client.post(reverse("admin:console_mcp_add"), console_form(name="remote", transport="http", url=url))
        assert answer.status_code == 200 and "NETA_MCP_HTTP_ALLOW" in answer.content.decode(), url
    assert not McpServer.objects.exists() and canary.requests == []
    # A stored row is checked again when it connects.
    McpServer.objects.create(name="stored", transport="http", url=canary.url + "/mcp", agents=["*"])
    refresh = mcp_server_refresh(actor=None, name="stored")
    assert not refresh.ok and "NETA_MCP_HTTP_ALLOW" in refresh.error and canary.requests == []
    # Allow-listed on purpose: it is reached.
    settings.NETA_MCP_HTTP_ALLOW = [canary.url.removeprefix("http://")]
    mcp_server_refresh(actor=None, name="stored")
    assert canary.requests


def test_mcp_tools_reach_no_agent_by_default(planted, account, settings):
    settings.NETA_SANDBOX = "none"
    reset_sandbox_probe()
    try:
        refresh = mcp_server_save(actor=account("root", superuser=True), name="demo", transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"])
        assert refresh.ok, refresh.error
        decision = resolve_tools({}, agent="default")["mcp__demo__echo"]
        assert not decision.effective and "open to no agent yet" in decision.reason
        mcp_server_save(actor=None, name="demo", discover=False, agents=["*"])
        assert resolve_tools({}, agent="default")["mcp__demo__echo"].effective
        # A subagent only through its agent's policy.
        assert not resolve_tools({}, agent="default", for_subagent=True)["mcp__demo__echo"].effective
        assert resolve_tools({"enabled": ["mcp__demo__echo"]}, agent="default", for_subagent=True)["mcp__demo__echo"].effective
    finally:
        reset_sandbox_probe()


def _call(tmp_path, name: str, args: dict):
    projection = resolve_tools({}, agent="anyone")
    result = tool_execute(name=name, args=args, ctx=ToolContext(roots=(tmp_path,), sandbox="none"), projection=projection)
    return result.content[0]["text"] if result.content else ""


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_stored_server_gets_no_secret_from_its_env_names(planted, tmp_path, settings, sandbox):
    """A row written before the rule, naming the secret key and a provider key: the server
    starts without them (a name in ``env_names`` that the rule refuses never crosses)."""
    if sandbox == "bwrap":
        require(bwrap_status().available, "bubblewrap not usable here")
    settings.NETA_SANDBOX = sandbox
    reset_sandbox_probe()
    try:
        McpServer.objects.create(
            name="leaky", transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"], agents=["*"],
            env_names=["NETA_SECRET_KEY", "ANTHROPIC_API_KEY", "NETA_DATABASE_URL"], read_only_paths=[str(TESTS)],
        )  # fmt: skip
        refresh = mcp_server_refresh(actor=None, name="leaky")
        assert refresh.ok, refresh.error
        facts = _call(tmp_path, "mcp__leaky__whoami", {})
        assert SECRET not in facts and PROVIDER_KEY not in facts and "canary-db-pw" not in facts
        assert "NETA_SECRET_KEY" not in facts and "ANTHROPIC_API_KEY" not in facts
        if sandbox == "bwrap":
            for protected in [*(str(p) for p in confined_protected()), "/etc/shadow"]:
                text = _call(tmp_path, "mcp__leaky__read_file", {"path": protected})
                assert text.startswith("cannot read") or text == "", (protected, text[:80])
    finally:
        reset_sandbox_probe()


def test_a_stored_server_whose_paths_would_show_the_server_does_not_start(planted, account, settings):
    require(bwrap_status().available, "bubblewrap not usable here")
    settings.NETA_SANDBOX = "bwrap"
    reset_sandbox_probe()
    try:
        McpServer.objects.create(name="wide", transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"], agents=["*"], read_only_paths=["/"])
        refresh = mcp_server_refresh(actor=None, name="wide")
        assert not refresh.ok and "read_only_paths refused" in refresh.error
    finally:
        reset_sandbox_probe()


def test_the_masks_hold_after_every_bind(planted, settings, tmp_path):
    """The protected paths and the state directory are hidden even inside a folder a bind
    shows (the masks used to come before the read-only binds, which showed them again)."""
    require(bwrap_status().available, "bubblewrap not usable here")
    var = Path(django_settings.VAR_DIR)
    var.mkdir(parents=True, exist_ok=True)
    canary_file = var / "mask-canary.txt"
    canary_file.write_text("canary-in-var-7f3a")
    try:
        argv = bwrap_argv(
            roots=(), cwd=Path("/tmp"), network=False, command=["/bin/sh", "-c", f"cat {canary_file} {var}/secret_key 2>&1; ls {var} | wc -l"],
            ro_binds=(str(django_settings.BASE_DIR),), protected=confined_protected(),
        )  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        assert "canary-in-var-7f3a" not in out
        assert out.strip().endswith("0")  # the state directory is an empty folder inside
    finally:
        canary_file.unlink(missing_ok=True)
