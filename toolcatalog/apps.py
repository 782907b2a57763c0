from django.apps import AppConfig


class ToolcatalogConfig(AppConfig):
    name = "toolcatalog"
    verbose_name = "Tool catalog"

    def ready(self) -> None:
        from toolcatalog import builtins, checks  # noqa: F401 - registers the builtins and the checks
