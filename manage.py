#!/usr/bin/env python
"""Django's command-line utility for karpweb."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpweb.settings")
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
