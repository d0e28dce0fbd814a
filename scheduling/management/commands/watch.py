import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Follow the cluster's watches and provision in Karpenter's batch windows (KARPWEB_CLUSTER=kubernetes). "
            "One replica watches at a time (the kubernetes-watch lease); another waits. Stops on SIGTERM or SIGINT.")

    def add_arguments(self, parser):
        parser.add_argument("--duration", type=float, default=None,
                            help="Stop after this many seconds (default: run until stopped).")

    def handle(self, *args, duration=None, **options):
        if settings.KARPWEB_CLUSTER != "kubernetes":
            raise CommandError("manage.py watch needs KARPWEB_CLUSTER=kubernetes: the simulated world has no watches "
                               "(its loop runs on Celery beat)")
        from django.utils import timezone

        from scheduling.loop import backends, nodes, steps
        from scheduling.loop.keptworld import KeptWorld
        from scheduling.loop.runs import run_step
        from scheduling.loop.watch import WatchLoop

        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        cluster = backends.cluster()
        kept = KeptWorld()  # pods and nodes kept parsed between runs, updated from the watch's changes
        loop = WatchLoop(cluster, provision=lambda: run_step("provision", lambda: steps.provision(world_at=kept.world)),
                         after_launch=lambda: nodes.after_launch(backends.cloud(), cluster, timezone.now()), kept=kept,
                         lifecycle=lambda: run_step("lifecycle", lambda: steps.lifecycle(world_at=kept.world)))
        result = loop.run(duration=duration, stop=stop)
        self.stdout.write(f"watch stopped: {'led' if result['leading'] else 'never held the lease'}, "
                          f"{result['batches']} provisioning batch{'es' if result['batches'] != 1 else ''}, "
                          f"{result['lifecycles']} lifecycle pass{'es' if result['lifecycles'] != 1 else ''}")
