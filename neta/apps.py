from django.apps import AppConfig


class NetaConfig(AppConfig):
    name = "neta"
    verbose_name = "Neta"
