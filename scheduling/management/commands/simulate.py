"""`python manage.py simulate WORLD.json [--out DECISIONS.json]`

Every decision the control loop would take for a snapshot of the world, touching nothing
(docs/simulate-interface.md, docs/simulate.md). All logic lives in `scheduling.engine`; this
command only reads, writes, and turns bad input into exit status 2 with one line per problem.
"""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scheduling.engine import WorldError, simulate_json

EXIT_BAD_INPUT = 2


class Command(BaseCommand):
    help = "Show the decisions the control loop would take for WORLD.json (use - for stdin), without acting."

    def add_arguments(self, parser):
        parser.add_argument("world", help="the world as JSON (Kubernetes- and EC2-shaped objects), or - for stdin")
        parser.add_argument("--out", help="write DECISIONS.json to this file instead of stdout")

    def handle(self, *args, **options):
        source = options["world"]
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._bad_input([f"{source}: cannot read: {getattr(exc, 'strerror', None) or exc}"])
        try:
            decisions = simulate_json(text, source=source)
        except WorldError as exc:
            self._bad_input(exc.lines())
        output = json.dumps(decisions, indent=2) + "\n"
        if options["out"]:
            try:
                Path(options["out"]).write_text(output, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"{options['out']}: cannot write: {exc.strerror or exc}") from None
        else:
            self.stdout.write(output, ending="")

    def _bad_input(self, lines):
        for line in lines:
            self.stderr.write(line)
        sys.exit(EXIT_BAD_INPUT)
