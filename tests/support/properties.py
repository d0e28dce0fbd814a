"""How many examples a property test tries.

``.ci/run`` runs every property with its full count (``HYPOTHESIS_PROFILE=ci``, or
``--hypothesis-profile=ci``); any other run
tries a fifth of it (at least 20), so that ``./karpweb.sh test -m engine`` answers in seconds while
CI keeps searching as hard as before. A failure CI finds prints its seed (``@reproduce_failure``),
which replays it in any run.
"""

from hypothesis import settings

CI_PROFILE = "ci"
settings.register_profile(CI_PROFILE, print_blob=True)

full_counts = False  # tests/conftest.py sets it from --hypothesis-profile before the tests are imported


def examples(full: int) -> int:
    """``max_examples`` for a property whose full search is ``full`` examples."""
    return full if full_counts else max(20, full // 5)
