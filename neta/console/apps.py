from django.contrib.admin.apps import SimpleAdminConfig


class ConsoleAdminConfig(SimpleAdminConfig):
    """``django.contrib.admin`` with the console's site (neta/console/site.py) as ``admin.site``.

    The admin modules are discovered by the URLconf (``neta/urls.py``), not when Django starts:
    a Celery worker or a management command never serves the console and skips their imports
    (~0.2 s of CPU a process). ``manage.py check`` loads the URLconf, so the admin's checks
    still run."""

    default_site = "neta.console.site.ConsoleSite"
