"""The Celery task that supervises one subagent child (queue ``NETA_SUBAGENT_QUEUE``).

Acks late: a worker that dies mid-child leaves the message to be delivered again, and the
claim (a conditional UPDATE ``queued → starting``) makes that second delivery a no-op; the
reaper records the child of a dead worker as ``lost``. Run a worker for it with
``celery -A neta worker -Q subagents --prefetch-multiplier 1 --pool prefork`` (README).
"""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from runtime.subagents.host import SUPERVISE_TASK, delegate_from_child
from runtime.subagents.hosting import supervise_subprocess_run


@shared_task(name=SUPERVISE_TASK, acks_late=True, ignore_result=True)
def supervise_subagent(run_id: str, max_per_session: int = 8) -> None:

    close_old_connections()  # the task thread keeps its connection (neta/celery.py): drop a broken one
    supervise_subprocess_run(run_id, max_per_session=max_per_session, delegate=delegate_from_child)
