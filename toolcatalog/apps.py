from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ToolcatalogConfig(AppConfig):
    name = "toolcatalog"
    verbose_name = _("Tool catalog")

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save  # app code loads in ready(), once every app's models are

        from toolcatalog import builtins, checks  # noqa: F401 - registers the builtins and the checks
        from toolcatalog.mcp import catalog as mcp_catalog  # app code loads in ready(), once every app's models are
        from toolcatalog.mcp import connections as mcp_connections  # app code loads in ready(), once every app's models are
        from toolcatalog.models import McpServer, ToolConfig  # app code loads in ready(), once every app's models are
        from toolcatalog.protocol import add_registry_refresher  # app code loads in ready(), once every app's models are
        from toolcatalog.services import mcp_event_record  # app code loads in ready(), once every app's models are

        # Every change of a governance row or an MCP server is a new catalog version
        # (toolcatalog/catalog_version.py).
        for signal in (post_save, post_delete):
            signal.connect(_bump, sender=ToolConfig, dispatch_uid=f"toolcatalog-version-{signal is post_save}")
            signal.connect(_bump, sender=McpServer, dispatch_uid=f"toolcatalog-mcp-version-{signal is post_save}")
        # The MCP servers' tools join this process's registry from the rows (docs/tools.md, "MCP tools").
        add_registry_refresher(mcp_catalog.sync_registry)
        mcp_connections.set_event_handler(mcp_event_record)
        # No tool is handed the web search backend's key (toolcatalog.environment).
        from toolcatalog.environment import set_key_names
        from toolcatalog.web_search_backends import search_key_names  # app code loads in ready(), once every app's models are

        set_key_names("web_search", search_key_names)


def _bump(sender, **kwargs) -> None:
    from toolcatalog.catalog_version import bump  # app code loads in ready(), once every app's models are

    bump()
