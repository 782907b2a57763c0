from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SessionsTreeConfig(AppConfig):
    name = "sessions_tree"
    verbose_name = _("Session store")
