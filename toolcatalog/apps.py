from django.apps import AppConfig


class ToolcatalogConfig(AppConfig):
    name = "toolcatalog"
