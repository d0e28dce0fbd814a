"""python manage.py remove_cluster NAME: the cluster leaves the fleet (scheduling/loop/removal.py). Audited
(source cli). Its nodes and EC2 instances keep running: karpweb stops mirroring and acting on it."""

from django.core.management.base import BaseCommand, CommandError

from scheduling.loop.removal import RemovalError, remove_cluster
from scheduling.models import AuditEntry


class Command(BaseCommand):
    help = ("Remove the cluster NAME from the fleet: refused while one of its loop steps runs; its steps and watch "
            "stop, its reservation holds are released, its decisions and audit entries are kept as history and its "
            "mirrored Kubernetes objects are deleted. Its nodes and instances are not touched.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="The cluster's name.")

    def handle(self, *args, name, **options):
        try:
            removed = remove_cluster(name, user=None, source=AuditEntry.Source.CLI)
        except RemovalError as exc:
            raise CommandError(str(exc)) from None
        deleted = ", ".join(f"{label} {count}" for label, count in removed.rows_deleted.items())
        self.stdout.write(f"removed cluster {removed.name}: {removed.holds_released} reservation hold(s) released, "
                          f"{removed.decisions_kept} decision(s) and {removed.audit_entries_kept} audit entr(y/ies) "
                          f"kept as history; deleted {deleted}. Its nodes and instances were not touched.")
