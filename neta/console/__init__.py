"""The staff console's own pages, inside the Django admin site (docs/console.md).

They compose several apps (runs, agents, tools, skills), so they live here, at the top,
and stay thin: each reads through the apps' selectors and writes through their services
with the acting user. ``site.ConsoleSite`` is the admin site (``neta.apps.ConsoleAdminConfig``).
"""
