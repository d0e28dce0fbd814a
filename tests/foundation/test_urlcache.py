"""detail_url gives what reverse() gives, for any name the `str` converter takes and refuses."""

import pytest
from django.urls import NoReverseMatch, reverse, set_script_prefix
from hypothesis import given
from hypothesis import strategies as st

from karpweb.urlcache import detail_url

segment = st.text(min_size=1, max_size=40).filter(lambda text: "/" not in text)


@given(segment)
def test_one_argument_matches_reverse(name):
    for viewname in ("scheduling:node", "reservations:detail", "scheduling:nodepool"):
        assert detail_url(viewname, name) == reverse(viewname, args=[name])


@given(segment, segment)
def test_two_arguments_match_reverse(namespace, name):
    assert detail_url("scheduling:pod", namespace, name) == reverse("scheduling:pod", args=[namespace, name])


@pytest.mark.parametrize("bad", ["", "a/b"])
def test_what_reverse_refuses_it_refuses(bad):
    with pytest.raises(NoReverseMatch):
        detail_url("scheduling:node", bad)


def test_a_script_prefix_is_honoured():
    try:
        set_script_prefix("/karpweb/")
        assert detail_url("scheduling:node", "ip-10-0-0-1") == "/karpweb/nodes/ip-10-0-0-1/"
    finally:
        set_script_prefix("/")
    assert detail_url("scheduling:node", "ip-10-0-0-1") == "/nodes/ip-10-0-0-1/"


def test_a_changed_urlconf_is_followed(settings):
    assert detail_url("scheduling:node", "n1") == "/nodes/n1/"
    settings.ROOT_URLCONF = "tests.foundation.prefixed_urls"
    assert detail_url("scheduling:node", "n1") == "/console/nodes/n1/"
