"""The console's MCP pages: the list shows each server's state, Refresh works as a plain
form, a server is added and changed through the service, and only staff with the right
permission write."""

from __future__ import annotations

import sys

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from audit.models import AuditEntry
from tests.support.mcp_fixtures import SERVER, TESTS, marks, mcp_clean, no_sandbox, stdio_server  # noqa: F401 - fixtures
from toolcatalog.models import McpServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def test_adding_a_server_lists_its_tools_and_the_list_shows_its_state(admin_client, marks, no_sandbox):
    form = {
        "name": "demo", "transport": "stdio", "command": sys.executable, "args": f"{SERVER}\nstdio",
        "env_names": "MCP_TEST_MARKS", "enabled": "on", "connect_timeout": "60", "call_timeout": "30",
        "agents": "", "read_only_paths": str(TESTS),
    }
    response = admin_client.post(reverse("admin:console_mcp_add"), form, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert "10 tool(s) listed." in text and 'data-tool="mcp__demo__echo"' in text
    row = McpServer.objects.get(name="demo")
    assert row.args == [str(SERVER), "stdio"] and row.env_names == ["MCP_TEST_MARKS"] and len(row.tools) == 10
    assert AuditEntry.objects.filter(action="mcp_server.change").exists()

    page = admin_client.get(reverse("admin:console_mcp")).content.decode()
    assert 'data-server="demo"' in page and "connected" in page and "pill-ok" in page
    # The tool pages cover MCP tools without special cases.
    tools = admin_client.get(reverse("admin:console_tools")).content.decode()
    assert 'data-tool="mcp__demo__echo"' in tools
    detail = admin_client.get(reverse("admin:console_tool", args=["mcp__demo__echo"])).content.decode()
    assert "Echo the text back." in detail and "<td>mcp</td>" in detail
    overview = admin_client.get(reverse("admin:index")).content.decode()
    assert 'data-check="mcp-servers"' in overview


def test_refresh_button_connects_anew(admin_client, stdio_server):
    stdio_server()
    McpServer.objects.filter(name="demo").update(tools=[])
    response = admin_client.post(reverse("admin:console_mcp_refresh", args=["demo"]), {"next": "list"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:console_mcp")
    notes = [str(m) for m in response.context["messages"]]
    assert "demo: 10 tool(s) listed." in notes, notes
    assert len(McpServer.objects.get(name="demo").tools) == 10
    assert admin_client.get(reverse("admin:console_mcp_refresh", args=["demo"])).status_code == 405


def test_a_failing_server_shows_its_error(admin_client, db, settings):
    settings.NETA_MCP_HTTP_ALLOW = ["127.0.0.1:9"]
    form = {"name": "gone", "transport": "http", "url": "http://127.0.0.1:9/mcp", "enabled": "on", "connect_timeout": "3", "call_timeout": "5"}
    response = admin_client.post(reverse("admin:console_mcp_add"), form, follow=True)
    assert "could not start" in response.content.decode()
    page = admin_client.get(reverse("admin:console_mcp")).content.decode()
    assert "pill-degraded" in page and "could not start" in page


def test_bad_input_is_a_form_error_and_nothing_is_saved(admin_client, db):
    form = {"name": "ok", "transport": "stdio", "command": "", "enabled": "on", "connect_timeout": "10", "call_timeout": "5", "env_names": "TOKEN=secret"}
    response = admin_client.post(reverse("admin:console_mcp_add"), form)
    assert response.status_code == 200
    text = response.content.decode()
    assert "a stdio server needs a command" in text and "never values" in text
    assert not McpServer.objects.exists()


def test_staff_without_the_permission_cannot_write(client, django_user_model, db):
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client.force_login(user)
    McpServer.objects.create(name="demo", transport="http", url="http://127.0.0.1:9/mcp")
    assert client.get(reverse("admin:console_mcp")).status_code == 200
    assert client.post(reverse("admin:console_mcp_refresh", args=["demo"])).status_code == 403
    form = {"name": "x", "transport": "http", "url": "http://127.0.0.1:9/mcp", "connect_timeout": "3", "call_timeout": "5"}
    assert client.post(reverse("admin:console_mcp_add"), form).status_code == 403
    assert client.post(reverse("admin:console_mcp_server", args=["demo"]), form).status_code == 403
    assert McpServer.objects.count() == 1
