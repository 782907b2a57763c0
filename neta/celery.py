"""The Celery app used when ``NETA_TASK_BACKEND=celery`` (Redis broker).

Start a worker with ``celery -A neta worker -l info``. Every worker reaps at start-up
(runs whose process on its host is gone) and then every ``NETA_REAPER_INTERVAL_SECONDS``
on a timer thread; the beat schedule runs the same round (``celery -A neta beat``, or
``worker -B``) for deployments that prefer it.
"""

import os

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

# DjangoTask gives tasks delay_on_commit(): enqueue only after the transaction commits.
app = Celery("neta", task_cls="celery.contrib.django.task:DjangoTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The beat schedule (the reaper every NETA_REAPER_INTERVAL_SECONDS) is CELERY_BEAT_SCHEDULE in settings.
# runtime.runs.tasks: the turn and the reaper round; runtime.subagents.tasks: a child's supervisor
app.autodiscover_tasks(["runtime.runs", "runtime.subagents"])


@worker_init.connect
@worker_process_init.connect
def _worker_process_setup(**_):
    """A worker runs its tasks one at a time on one thread for as long as it lives (the main
    thread with ``-P solo``, each prefork child's): that thread keeps its database
    connection from task to task (``infra.db_threads``; Celery's Django fixup still
    closes a broken one after a task), whatever ``NETA_DB_CONN_MAX_AGE`` says. The
    collector is set for a long-lived process (``infra.gc_tuning``)."""
    from infra.gc_tuning import tune  # app code loads once Django is set up (the signal)
    from infra.db_threads import keep_connections  # app code loads once Django is set up (the signal)

    keep_connections()
    tune()


@worker_ready.connect
def _start_reaper(**_):
    from runtime.runs.reaper import start_reaper_timer  # app code loads once Django is set up (the signal)
    from toolcatalog.sandbox import effective_sandbox  # app code loads once Django is set up (the signal)

    effective_sandbox()  # the sandbox probe: a fallback to none is logged at start-up
    from toolcatalog.services import mcp_servers_discover_in_background  # app code loads once Django is set up (the signal)

    # MCP servers list their tools (docs/tools.md, "MCP tools"); this parent process runs no
    # tool, so the servers stop again (each forked child connects on its first call).
    mcp_servers_discover_in_background(keep_connections=False)
    start_reaper_timer()
