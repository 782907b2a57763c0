from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from runtime.runs.reaper import reap_stale_runs


class Command(BaseCommand):
    help = (
        "One reaper round: runs whose process is gone or silent become lost (in-flight entry aborted, open tool calls "
        "closed, accepted prompts carried into a new run); queued runs nothing can run any more are submitted again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--stale-seconds", type=int, default=None)

    def handle(self, *args, stale_seconds=None, **options):
        # This process exits at once: with the inline backend a run it submits is left
        # for the web server's reaper (which sees this process gone) instead of started here.
        start = settings.NETA_TASK_BACKEND != "inline"
        reaped = reap_stale_runs(stale_seconds=stale_seconds, start=start)
        for run in reaped:
            self.stdout.write(f"{run.status}: {run.run_id} session {run.session_id}: {run.error}")
        self.stdout.write(f"{len(reaped)} run(s) reaped")
