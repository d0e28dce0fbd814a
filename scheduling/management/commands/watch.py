import signal
import threading

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Follow clusters' watches and provision in Karpenter's batch windows (real Kubernetes clusters only). "
            "Without options: the default cluster. One replica watches a cluster at a time (its kubernetes-watch "
            "lease); another waits. Stops on SIGTERM or SIGINT.")

    def add_arguments(self, parser):
        parser.add_argument("--duration", type=float, default=None,
                            help="Stop after this many seconds (default: run until stopped).")
        parser.add_argument("--cluster", action="append", default=[], metavar="NAME",
                            help="Watch this cluster (repeatable).")
        parser.add_argument("--shard", action="append", default=[], metavar="SHARD",
                            help="Watch every cluster of this shard (repeatable).")

    def handle(self, *args, duration=None, cluster=(), shard=(), **options):
        from fleet.connection import is_kubernetes
        from fleet.models import Cluster
        from fleet.scope import carry, default_cluster
        from scheduling.loop.runs import scope_for

        clusters = self._clusters(Cluster, list(cluster), list(shard), default_cluster)
        for chosen in clusters:
            with scope_for(chosen):
                if not is_kubernetes():
                    raise CommandError(f"cluster {chosen.name}: manage.py watch needs a real Kubernetes cluster (its "
                                       "connection is simulated: set it in the admin, Fleet: clusters): the simulated "
                                       "world has no watches (its loop runs on Celery beat)")
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if len(clusters) == 1:
            with scope_for(clusters[0]):
                results = {clusters[0].name: self._watch(duration, stop)}
        else:
            # One thread per cluster, each in its cluster's scope (fleet.scope.carry), its own lease,
            # adapter and kept world; a failing one stops all, so that the process restarts whole.
            results, threads = {}, []
            for chosen in clusters:
                with scope_for(chosen):
                    target = carry(self._watched(chosen.name, duration, stop, results))
                threads.append(threading.Thread(target=target, name=f"watch-{chosen.name}", daemon=True))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            failed = {name: result for name, result in results.items() if isinstance(result, BaseException)}
            if failed:
                raise CommandError("; ".join(f"cluster {name}: {type(exc).__name__}: {exc}" for name, exc in failed.items()))
        for name, result in results.items():
            self.stdout.write(f"watch of {name} stopped: {'led' if result['leading'] else 'never held the lease'}, "
                              f"{result['batches']} provisioning batch{'es' if result['batches'] != 1 else ''}, "
                              f"{result['lifecycles']} lifecycle pass{'es' if result['lifecycles'] != 1 else ''}")

    @staticmethod
    def _clusters(Cluster, names: list[str], shards: list[str], default_cluster) -> list:
        if not names and not shards:
            return [default_cluster()]
        chosen = {c.name: c for c in Cluster.objects.select_related("account").filter(name__in=names)}
        missing = [name for name in names if name not in chosen]
        if missing:
            raise CommandError(f"--cluster: no cluster is named {', '.join(missing)}")
        for shard in shards:
            in_shard = list(Cluster.objects.select_related("account").filter(shard=shard))
            if not in_shard:
                raise CommandError(f"--shard: no cluster is in shard {shard!r}")
            chosen.update({c.name: c for c in in_shard})
        return [chosen[name] for name in sorted(chosen)]

    def _watched(self, name, duration, stop, results):
        def run():
            from django.db import connection

            try:
                results[name] = self._watch(duration, stop)
            except BaseException as exc:  # recorded for the main thread, which says which cluster failed
                results[name] = exc
                stop.set()
            finally:
                connection.close()  # this thread's own database connection

        return run

    @staticmethod
    def _watch(duration, stop) -> dict:
        """The watch of the scope's cluster, in the calling thread."""
        from django.utils import timezone

        from scheduling.loop import backends, nodes, steps
        from scheduling.loop.keptworld import KeptWorld
        from scheduling.loop.runs import run_step
        from scheduling.loop.watch import WatchLoop
        from fleet.scope import loop_code, working_cluster

        cluster_row = working_cluster()
        cluster = backends.cluster()
        kept = KeptWorld()  # pods and nodes kept parsed between runs, updated from the watch's changes
        loop = WatchLoop(cluster, provision=lambda: run_step("provision", lambda: steps.provision(world_at=kept.world),
                                                             cluster=cluster_row),
                         after_launch=lambda: nodes.after_launch(backends.cloud(), cluster, timezone.now()), kept=kept,
                         lifecycle=lambda: run_step("lifecycle", lambda: steps.lifecycle(world_at=kept.world),
                                                    cluster=cluster_row))
        with loop_code():  # the watch is loop code: every row it touches is its scope's cluster's
            return loop.run(duration=duration, stop=stop)
