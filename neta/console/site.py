"""The admin site with the console's pages: the overview as its home, the tools catalog, a skill's page, access."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path
from django.utils.translation import gettext_lazy as _


class ConsoleSite(admin.AdminSite):
    site_header = _("Neta console")
    site_title = _("Neta console")
    index_title = _("Overview")
    index_template = "console/overview.html"
    enable_nav_sidebar = False  # the console's own navigation is in the header; the raw tables are on the overview

    def index(self, request, extra_context=None):
        from neta.console.overview import overview_context  # the pages load with the URLconf, after the apps

        return super().index(request, {**overview_context(), **(extra_context or {})})

    def get_urls(self):
        from neta.console import access, mcp, skills, tools, usage  # the pages load with the URLconf, after the apps

        console = [
            path("console/access/", self.admin_view(access.access_page), name="console_access"),
            path("console/usage/", self.admin_view(usage.usage_page), name="console_usage"),
            path("console/tools/", self.admin_view(tools.tool_list), name="console_tools"),
            path("console/mcp/", self.admin_view(mcp.mcp_list), name="console_mcp"),
            path("console/mcp/add/", self.admin_view(mcp.mcp_detail), name="console_mcp_add"),
            path("console/mcp/<slug:name>/", self.admin_view(mcp.mcp_detail), name="console_mcp_server"),
            path("console/mcp/<slug:name>/refresh/", self.admin_view(mcp.mcp_refresh), name="console_mcp_refresh"),
            path("console/tools/<str:name>/", self.admin_view(tools.tool_detail), name="console_tool"),
            path("console/skills/<int:pk>/", self.admin_view(skills.skill_detail), name="console_skill"),
        ]
        return console + super().get_urls()
