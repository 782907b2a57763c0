from __future__ import annotations

from django.core.management.base import BaseCommand

from runtime.reaper import reap_stale_runs


class Command(BaseCommand):
    help = "Finalize runs whose worker stopped sending heartbeats (status lost, in-flight entry aborted)."

    def add_arguments(self, parser):
        parser.add_argument("--stale-seconds", type=int, default=None)

    def handle(self, *args, stale_seconds=None, **options):
        reaped = reap_stale_runs(stale_seconds=stale_seconds)
        for run in reaped:
            self.stdout.write(f"lost: {run.run_id} session {run.session_id}")
        self.stdout.write(f"{len(reaped)} run(s) reaped")
