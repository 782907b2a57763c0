from django.apps import AppConfig


class ToolcatalogConfig(AppConfig):
    name = "toolcatalog"
    verbose_name = "Tool catalog"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from toolcatalog import builtins, checks  # noqa: F401 - registers the builtins and the checks
        from toolcatalog.models import ToolConfig

        # Every change of a governance row is a new catalog version (toolcatalog/catalog_version.py).
        for signal in (post_save, post_delete):
            signal.connect(_bump, sender=ToolConfig, dispatch_uid=f"toolcatalog-version-{signal is post_save}")


def _bump(sender, **kwargs) -> None:
    from toolcatalog.catalog_version import bump

    bump()
