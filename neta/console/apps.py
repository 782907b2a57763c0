from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    """``django.contrib.admin`` with the console's site (neta/console/site.py) as ``admin.site``."""

    default_site = "neta.console.site.ConsoleSite"
