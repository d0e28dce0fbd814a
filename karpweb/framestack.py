"""Room on CPython's frame stack for a whole request, so no call in it maps or unmaps memory.

CPython before 3.13.13 keeps Python frames in 16 KiB blocks and unmaps a block the moment the call
that opened it returns (gh-142183). A page whose rendering calls back and forth across a block's edge
maps and unmaps 16 KiB, and faults its pages in again, on every call: thousands of times a request,
10 to 25 % of its CPU, coming and going with how deep the request happens to run
(docs/operations.md#performance).

A frame too big for the current block gets a block of its own, the next power of two of 16 KiB that
holds it, and the calls made under it use what is left of that block. `call_with_room` has a value
stack of ROOM_WORDS slots (131 KiB, never touched, so never faulted in): its block is 256 KiB, and the
~125 KiB after it (about a thousand frames) holds every call a request makes. One block is mapped and
unmapped a request instead of one per crossing.
"""

import functools

ROOM_WORDS = 16_400  # slots of 8 bytes: just over 128 KiB, so the block is 256 KiB


def call_with_room(function, /, *args, **kwargs):
    """function(*args, **kwargs), its calls in a frame-stack block of their own."""
    return function(*args, **kwargs)


# The frame's size is its code's locals plus its value stack: a larger stack than the code needs is
# allowed and unused; only the block it is placed in changes.
call_with_room.__code__ = call_with_room.__code__.replace(co_stacksize=ROOM_WORDS)


def with_room(application):
    """A WSGI application whose requests run in call_with_room."""

    @functools.wraps(application)
    def run(environ, start_response):
        return call_with_room(application, environ, start_response)

    return run
