import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.demo import seed


class Command(BaseCommand):
    help = "Write the demo world (reservations, NodePools, nodes, pods). Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--now", help="Pretend it is this time (ISO 8601, UTC); default: the current time.")

    def handle(self, *args, now=None, **options):
        moment = timezone.now()
        if now:
            try:
                moment = datetime.datetime.fromisoformat(now.replace("Z", "+00:00"))
            except ValueError:
                raise CommandError(f'--now: "{now}" is not an ISO 8601 time') from None
            if moment.tzinfo is None:
                raise CommandError(f'--now: "{now}" has no time zone; add Z for UTC')
        seed(moment)
        self.stdout.write(self.style.SUCCESS("Demo world written."))
