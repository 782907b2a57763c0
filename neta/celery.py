"""The Celery app used when ``NETA_TASK_BACKEND=celery`` (Redis broker).

Start a worker with ``celery -A neta worker -l info``; the beat schedule runs the
reaper every ten seconds (``celery -A neta beat``, or ``worker -B``).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

# DjangoTask gives tasks delay_on_commit(): enqueue only after the transaction commits.
app = Celery("neta", task_cls="celery.contrib.django.task:DjangoTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.beat_schedule = {
    "reap-stale-runs": {"task": "runtime.reap_stale_runs", "schedule": 10.0},
}
app.autodiscover_tasks()
