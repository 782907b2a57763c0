"""``manage.py mcp_refresh [NAME ...]``

Connects to the MCP servers (all enabled ones, or those named) and lists their tools into
the catalog, as the console's Refresh button does. Prints one line per server; exit
status 1 when a server could not be reached, 2 for an unknown name.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from toolcatalog.mcp.connections import reset_manager
from toolcatalog.models import McpServer
from toolcatalog.services import mcp_server_refresh


class Command(BaseCommand):
    help = "List the tools of the MCP servers (all enabled, or the named ones) into the tool catalog."

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="server names (default: every enabled server)")

    def handle(self, *args, names, **options):
        if names:
            missing = sorted(set(names) - set(McpServer.objects.filter(name__in=names).values_list("name", flat=True)))
            if missing:
                raise CommandError(f"no MCP server named {', '.join(missing)}", returncode=2)
        else:
            names = list(McpServer.objects.filter(enabled=True).values_list("name", flat=True))
        failed = 0
        try:
            for name in names:
                refresh = mcp_server_refresh(actor=None, name=name)
                if refresh.ok:
                    skipped = f" (skipped: {'; '.join(refresh.skipped)})" if refresh.skipped else ""
                    self.stdout.write(f"{name}: {len(refresh.tools)} tool(s): {', '.join(refresh.tools)}{skipped}")
                else:
                    failed += 1
                    self.stderr.write(f"{name}: {refresh.error}")
        finally:
            reset_manager()  # the servers this command started stop with it
        if failed:
            raise CommandError(f"{failed} server(s) could not be reached", returncode=1)
