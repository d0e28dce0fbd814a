#!/usr/bin/env python
"""Django's command-line utility for karpweb."""

import os
import sys

# Commands that serve pages (and so sign sessions and CSRF tokens) need the deployment's SECRET_KEY;
# every other command (simulate, migrate, seed_demo, ...) runs in a fresh shell without one.
WEB_COMMANDS = {"runserver", "testserver"}


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command not in WEB_COMMANDS:
        os.environ["KARPWEB_COMMAND_WITHOUT_WEB"] = "true"
    else:
        os.environ.pop("KARPWEB_COMMAND_WITHOUT_WEB", None)
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad environment value: say which, without a traceback.
        print(f"karpweb: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
