from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"

    def ready(self):
        # The realtime gateway: tree events (after commit) and streaming events go to
        # the session's Channels group, from whichever process produced them.
        from runtime import realtime

        realtime.install()
