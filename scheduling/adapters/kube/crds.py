"""Install karpweb's CustomResourceDefinitions (deploy/crds/) into a cluster.

On a cluster where Karpenter already installed its own CRDs for the same kinds, leave them alone
(``replace_existing=False``, the default): karpweb reads and writes the same group, version and
field names, so it works with either set.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .errors import ClusterError
from .resources import CRD
from .rest import KubeRest, error_for

CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "crds"


def load_crds(directory: Path = CRD_DIR) -> list[dict]:
    documents = []
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                documents.append(document)
    if not documents:
        raise FileNotFoundError(f"no CustomResourceDefinitions under {directory}")
    return documents


def install_crds(api_client: ApiClient, directory: Path = CRD_DIR, *, replace_existing: bool = False,
                 timeout: float = 60.0) -> list[str]:
    """Create each CRD that is missing (or replace it when asked) and wait until all are Established.
    Returns the CRD names. Raises :class:`ClusterError` with an operator message on failure."""
    rest = KubeRest(api_client)
    names = []
    for crd in load_crds(directory):
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            rest.create(CRD, crd)
        except ApiException as exc:
            if exc.status != 409:
                raise error_for(rest, exc, "create", CRD, name) from exc
            if replace_existing:
                try:
                    current = rest.get(CRD, name)
                    body = dict(crd, metadata={**crd["metadata"],
                                               "resourceVersion": current["metadata"]["resourceVersion"]})
                    rest.replace(CRD, name, body)
                except ApiException as replace_exc:
                    raise error_for(rest, replace_exc, "update", CRD, name) from replace_exc
        except Exception as exc:  # unreachable server, TLS, ...
            raise error_for(rest, exc, "create", CRD, name) from exc
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for name in sorted(pending):
            try:
                crd = rest.get(CRD, name)
            except ApiException as exc:
                raise error_for(rest, exc, "get", CRD, name) from exc
            conditions = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
            if (conditions.get("NamesAccepted") or {}).get("status") == "False":
                raise ClusterError(f"{CRD.describe(name)}: names not accepted: "
                                   f"{conditions['NamesAccepted'].get('message', '')}", status=422, reason="Invalid")
            if (conditions.get("Established") or {}).get("status") == "True":
                pending.discard(name)
        if pending:
            if time.monotonic() > deadline:
                raise ClusterError(f"CustomResourceDefinitions {', '.join(sorted(pending))} not Established "
                                   f"after {timeout:.0f} s", status=504, reason="Timeout")
            time.sleep(0.1)
    return names
