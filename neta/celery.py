"""The Celery app used when ``NETA_TASK_BACKEND=celery``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

app = Celery("neta")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
