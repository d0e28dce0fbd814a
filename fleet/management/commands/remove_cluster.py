"""python manage.py remove_cluster NAME: the cluster leaves the fleet (scheduling/loop/removal.py). Audited
(source cli). Its nodes and EC2 instances keep running: karpweb stops mirroring and acting on it."""

from django.core.management.base import BaseCommand, CommandError

from scheduling.loop.removal import RemovalError, drain, remove_cluster
from scheduling.models import AuditEntry


class Command(BaseCommand):
    help = ("Remove the cluster NAME from the fleet: refused while one of its loop steps runs; its steps and watch "
            "stop, its reservation holds are released, its decisions and audit entries are kept as history and its "
            "mirrored Kubernetes objects are deleted. Its nodes and instances are not touched.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="The cluster's name.")
        parser.add_argument("--drain", action="store_true",
                            help="First delete the NodeClaims karpweb launched there (control mode only; their nodes "
                                 "drained and instances terminated by the loop), as many as the NodePools' disruption "
                                 "budgets allow at a time; run it again until none is left, and it then removes the "
                                 "cluster.")

    def handle(self, *args, name, **options):
        if options["drain"] and not self._drained(name):
            return
        try:
            removed = remove_cluster(name, user=None, source=AuditEntry.Source.CLI)
        except RemovalError as exc:
            raise CommandError(str(exc)) from None
        deleted = ", ".join(f"{label} {count}" for label, count in removed.rows_deleted.items())
        self.stdout.write(f"removed cluster {removed.name}: {removed.holds_released} reservation hold(s) released, "
                          f"{removed.decisions_kept} decision(s) and {removed.audit_entries_kept} audit entr(y/ies) "
                          f"kept as history; deleted {deleted}. Its nodes and instances were not touched.")

    def _drained(self, name: str) -> bool:
        try:
            drained = drain(name, user=None, source=AuditEntry.Source.CLI)
        except RemovalError as exc:
            raise CommandError(str(exc)) from None
        if drained.started or drained.deleting or drained.left:  # one call drains or removes, never both
            self.stdout.write(f"cluster {name}: {drained.started} NodeClaim(s) karpweb launched deleted now, "
                              f"{drained.deleting} being deleted (the loop drains their nodes and terminates their "
                              f"instances), {drained.left} waiting for the disruption budgets; run this again to "
                              "continue: the cluster is removed once none is left.")
            return False
        return True
