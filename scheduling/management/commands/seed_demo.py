import datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.demo import OverfullNode, seed


def real_world() -> str:
    """What makes this database a real cluster's or account's ('' for the simulated world): the demo's fake
    reservations, NodePools and nodes must never mix with what the sync writes there."""
    real = [f"KARPWEB_CLUSTER={settings.KARPWEB_CLUSTER}" if settings.KARPWEB_CLUSTER != "simulated" else "",
            f"KARPWEB_PROVIDER={settings.KARPWEB_PROVIDER}" if settings.KARPWEB_PROVIDER != "simulated" else ""]
    return " and ".join(r for r in real if r)


class Command(BaseCommand):
    help = ("Write the demo world (reservations, NodePools, nodes, pods). Safe to run again. Refused when karpweb "
            "is set up for a real cluster or AWS account (KARPWEB_CLUSTER=kubernetes or KARPWEB_PROVIDER=aws).")

    def add_arguments(self, parser):
        parser.add_argument("--now", help="Pretend it is this time (ISO 8601, UTC); default: the current time.")
        parser.add_argument("--skip-if-real", action="store_true",
                            help="With a real cluster or account, say so and write nothing (exit 0): what `./karpweb.sh run` uses.")
        parser.add_argument("--one-cluster", action="store_true",
                            help="Only the fleet's first cluster and its account: the world a single-cluster install sees.")

    def handle(self, *args, now=None, skip_if_real=False, one_cluster=False, **options):
        if real := real_world():
            message = (f"Not seeding the demo world: karpweb is set up for a real cluster or account ({real}), and its "
                       "database holds what the sync reads from them; demo reservations, NodePools and nodes would mix with them.")
            if skip_if_real:
                self.stdout.write(message)
                return
            raise CommandError(message)
        moment = timezone.now()
        if now:
            try:
                moment = datetime.datetime.fromisoformat(now.replace("Z", "+00:00"))
            except ValueError:
                raise CommandError(f'--now: "{now}" is not an ISO 8601 time') from None
            if moment.tzinfo is None:
                raise CommandError(f'--now: "{now}" has no time zone; add Z for UTC')
        try:
            seed(moment, fleet=not one_cluster)
        except OverfullNode as error:
            raise CommandError(f"Not seeding the demo world: {error}") from None
        self.stdout.write(self.style.SUCCESS("Demo world written."))
