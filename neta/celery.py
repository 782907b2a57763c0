"""The Celery app used when ``NETA_TASK_BACKEND=celery`` (Redis broker).

Workers (docs/deploy.md; ``deploy/Procfile``):

- runs: ``celery -A neta worker -Q <NETA_CELERY_QUEUE> -P threads -c 200``, one process per
  core. A turn mostly waits on its model, so one process runs many at once on threads;
  the process's one run watcher, one publisher loop and its pool of database connections
  (``infra/mysql_backend``) serve them all.
- subagents: ``celery -A neta worker -Q <NETA_SUBAGENT_QUEUE> -P prefork -c 8`` (a
  child's supervisor per pool process, with Celery's time limits).

Every worker reaps at start-up (runs whose process on its host is gone) and then every
``NETA_REAPER_INTERVAL_SECONDS`` on a timer thread; the beat schedule runs the same round
(``celery -A neta beat``, or ``worker -B``) for deployments that prefer it.
"""

import os

from celery import Celery
from celery.signals import celeryd_after_setup, worker_init, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

# DjangoTask gives tasks delay_on_commit(): enqueue only after the transaction commits.
app = Celery("neta", task_cls="celery.contrib.django.task:DjangoTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The beat schedule (the reaper every NETA_REAPER_INTERVAL_SECONDS) is CELERY_BEAT_SCHEDULE in settings.
# runtime.runs.tasks: the turn and the reaper round; runtime.subagents.tasks: a child's supervisor
app.autodiscover_tasks(["runtime.runs", "runtime.subagents"])


def _forks(sender) -> bool:
    """Whether the worker runs its tasks in forked children (the prefork pool)."""
    pool = str(getattr(sender, "pool_cls", "")).lower()
    return "prefork" in pool or "processes" in pool


@worker_init.connect
def _worker_setup(sender=None, **_):
    if not _forks(sender):  # threads or solo: the tasks run in this very process
        from runtime.llm.clients import load_sdks  # app code loads once Django is set up (the signal)

        _process_setup()
        load_sdks(_provider_kinds())  # the runs worker: not under the first burst of turns, thread after thread


def _provider_kinds() -> set[str] | None:
    """The provider kinds of the enabled models; None when the database cannot say (every SDK
    is loaded then)."""
    from django.db import DatabaseError, connection  # app code loads once Django is set up (the signal)

    from runtime.models import ModelConfig  # app code loads once Django is set up (the signal)

    try:
        return set(ModelConfig.objects.filter(enabled=True).values_list("provider_kind", flat=True).distinct())
    except DatabaseError:
        return None
    finally:
        connection.close()  # the start-up thread's own: a task thread opens its own


@worker_process_init.connect
def _worker_child_setup(**_):
    _process_setup()


def _process_setup():
    """Once in the process that runs the tasks (a prefork child, or the worker itself):

    - its task threads keep their database connections from task to task
      (``infra.db_threads``; on MariaDB the process's pool keeps them);
    - the channel layer and the publisher's loop are made now, once, before any thread
      publishes (Channels makes its layer lazily without a lock);
    - the collector is set for a long-lived process (``infra.gc_tuning``)."""
    from infra.db_threads import keep_connections  # app code loads once Django is set up (the signal)
    from infra.gc_tuning import tune  # app code loads once Django is set up (the signal)
    from runtime.realtime.publisher import event_publisher  # app code loads once Django is set up (the signal)

    keep_connections()
    event_publisher.prepare()
    tune()


@celeryd_after_setup.connect
def _consume_host_queue(sender=None, instance=None, **_):
    """A runs worker (one that consumes NETA_CELERY_QUEUE) also consumes its host's queue,
    where the turns of sessions whose workspace is on this host go (session affinity,
    ``runtime.runs.backends.affinity_queue``; docs/deploy.md, "Several hosts")."""
    from django.conf import settings  # app code loads once Django is set up (the signal)

    from runtime.runs.process import HOST, host_queue  # app code loads once Django is set up (the signal)

    queues = instance.app.amqp.queues
    if settings.NETA_SESSION_AFFINITY and settings.CELERY_TASK_DEFAULT_QUEUE in queues.consume_from:
        queues.select_add(host_queue(settings.CELERY_TASK_DEFAULT_QUEUE, HOST))


@worker_ready.connect
def _start_reaper(sender=None, **_):
    from runtime.runs.reaper import set_node, start_reaper_timer  # app code loads once Django is set up (the signal)

    set_node(getattr(sender, "hostname", "") or "")  # the node name the worker answers broadcasts with
    from toolcatalog.sandbox import effective_sandbox  # app code loads once Django is set up (the signal)

    effective_sandbox()  # the sandbox probe: a fallback to none is logged at start-up
    from toolcatalog.services import mcp_servers_discover_in_background  # app code loads once Django is set up (the signal)

    # MCP servers list their tools (docs/tools.md, "MCP tools"); this parent process runs no
    # tool, so the servers stop again (each forked child connects on its first call).
    mcp_servers_discover_in_background(keep_connections=False)
    start_reaper_timer()
