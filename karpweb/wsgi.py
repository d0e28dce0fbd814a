"""
WSGI config for karpweb project.

It exposes the WSGI callable as a module-level variable named ``application``.

For more information on this file, see
https://docs.djangoproject.com/en/5.2/howto/deployment/wsgi/
"""

import gc
import os

from django.core.wsgi import get_wsgi_application

from karpweb.framestack import with_room

os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'karpweb.settings')

# Each request in a frame-stack block of its own (karpweb/framestack.py: CPython 3.11's block thrash).
application = with_room(get_wsgi_application())

# The objects loaded so far live as long as the process: out of the cyclic collector's way. A
# worker holds about 170,000 of them, and each full collection walked them all (60 to 120 ms, in
# whichever request tripped it: most of the pages' p99 under load; docs/operations.md#performance).
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # the URLconf and the views it imports, loaded now to be frozen too
gc.freeze()
