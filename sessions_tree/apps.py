from django.apps import AppConfig


class SessionsTreeConfig(AppConfig):
    name = "sessions_tree"
    verbose_name = "Session store"
