"""reverse() for the detail-page links list pages render on every row (hundreds per page): the URL
pattern is resolved once per view name and script prefix, then each link is a substitution. The
result is the same string reverse() returns."""

import functools
from urllib.parse import quote

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import get_script_prefix, reverse

from fleet.scope import cluster_name, several_clusters

# What reverse() leaves unquoted in a path (django.urls.resolvers: RFC 3986 sub-delimiters and /~:@).
SAFE = "!$&'()*+,;=/~:@"
TOKENS = ("__karpweb_arg0__", "__karpweb_arg1__", "__karpweb_arg2__")


@functools.lru_cache(maxsize=256)
def _template(viewname: str, nargs: int, prefix: str) -> str:
    return reverse(viewname, args=TOKENS[:nargs])


def detail_url(viewname: str, *args: str) -> str:
    """reverse(viewname, args=args) for `str` path segments."""
    if len(args) > len(TOKENS) or not all(isinstance(arg, str) and arg and "/" not in arg for arg in args):
        return reverse(viewname, args=args)  # what the str converter refuses: let reverse() say so
    url = _template(viewname, len(args), get_script_prefix())
    for token, arg in zip(TOKENS, args):
        url = url.replace(token, quote(arg, safe=SAFE), 1)
    return url


def cluster_detail_url(viewname: str, cluster_id: int | None, *args: str) -> str:
    """The page of a Kubernetes-side object (unique per cluster and name). In a fleet of several
    clusters the cluster's name comes first (/clusters/<cluster>/nodes/<name>/: the routes of the same
    name with one more argument), so two clusters' NodePools "default" have a page each; a fleet of
    one keeps the links it always had (those routes still answer in a fleet: fleet.views.by_name)."""
    if cluster_id is None or not several_clusters():
        return detail_url(viewname, *args)
    return detail_url(viewname, cluster_name(cluster_id), *args)


@receiver(setting_changed)
def _forget_patterns(setting, **kwargs):
    if setting == "ROOT_URLCONF":  # as Django clears its own URL caches (tests override it)
        _template.cache_clear()


def cluster_url(cluster_id: int) -> str:
    """The page of the cluster with primary key `cluster_id` (its name from the kept list: no query)."""
    return detail_url("fleet:cluster", cluster_name(cluster_id))
