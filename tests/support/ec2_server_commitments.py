"""The test server's commitments: Reserved Instances and Savings Plans, which moto 5.2.5 lacks.

moto answers DescribeReservedInstances with "not yet implemented" and has no ``savingsplans`` service
at all. This module adds, in this process (imported by ``tests/support/ec2_server.py``):

* ``DescribeReservedInstances`` over the RIs a test adds with ``EC2TestServer.add_reserved_instances``
  (ids ``ReservedInstancesIds``; filters ``state``, ``scope``, ``instance-type``, ``availability-zone``,
  ``reserved-instances-id``, ``offering-class``; ``State`` "retired" once ``End`` has passed on the
  server clock).
* ``savingsplans`` ``DescribeSavingsPlans`` (``states``, ``savingsPlanIds``) and
  ``DescribeSavingsPlanRates`` (filters ``region``, ``instanceType``, ``productDescription``,
  ``tenancy``, ``productType``, ``usageType``, ``operation``; a plan of another account:
  ``ResourceNotFoundException``) over the plans added with ``EC2TestServer.add_savings_plan``. The
  service signs as ``savingsplans``; its requests reach this server when the client's endpoint is the
  server's (``KARPWEB_SAVINGSPLANS_ENDPOINT_URL`` defaults to the EC2 one), routed through moto's RAM
  app (the doctor's RAM handlers are added the same way).
* ``EC2TestServer.refuse_commitments(ri=True, sp=True)``: ``UnauthorizedOperation`` (EC2) and
  ``AccessDeniedException`` (Savings Plans) until reset, for the list-price fallback.

Everything here is test support, not product code.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from moto import backend_index
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses import EC2Response
from moto.iam.models import get_account_id_from
from moto.ram import urls as ram_urls

from tests.support.ec2_server import CALLS, CLOCK, FAULTS, Call, EC2TestServer, _LOCK

# account id -> RI id -> EC2-shaped RI; account id -> plan id -> {"plan": ..., "rates": [...]}
RESERVED_INSTANCES: dict[str, dict[str, dict[str, Any]]] = {}
SAVINGS_PLANS: dict[str, dict[str, dict[str, Any]]] = {}
REFUSED = {"ri": False, "sp": False}

RI_FILTERS = {"state": "State", "scope": "Scope", "instance-type": "InstanceType", "availability-zone": "AvailabilityZone",
              "reserved-instances-id": "ReservedInstancesId", "offering-class": "OfferingClass"}


def _ri_view(ri: dict[str, Any]) -> dict[str, Any]:
    view = copy.deepcopy(ri)
    if view["End"] <= CLOCK.now():
        view["State"] = "retired"
    return view


class _ReservedInstanceActions(EC2Response):
    def describe_reserved_instances(self) -> ActionResult:
        self.error_on_dryrun()
        if REFUSED["ri"]:
            raise EC2ClientError("UnauthorizedOperation",
                                 "You are not authorized to perform this operation (ec2:DescribeReservedInstances).")
        ids = self._get_param("ReservedInstancesIds", [])
        with _LOCK:
            found = [_ri_view(ri) for ri in RESERVED_INSTANCES.get(self.current_account, {}).values()]
        if ids:
            found = [ri for ri in found if ri["ReservedInstancesId"] in ids]
        for name, values in self._filters_from_querystring().items():
            key = RI_FILTERS.get(name)
            if key is None:
                raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
            found = [ri for ri in found if str(ri.get(key)) in values]
        return ActionResult({"ReservedInstances": sorted(found, key=lambda ri: ri["ReservedInstancesId"])})


setattr(EC2Response, "describe_reserved_instances", _ReservedInstanceActions.__dict__["describe_reserved_instances"])


# --- savingsplans (rest-json) -------------------------------------------------------------------------


def _json_error(code: str, message: str, status: int) -> Any:
    return status, {"x-amzn-ErrorType": code, "status": status, "Content-Type": "application/json"}, \
        json.dumps({"message": message})


def _account_of(headers: dict[str, str]) -> str:
    match = re.search(r"Credential=([^/]+)/", headers.get("Authorization") or headers.get("authorization") or "")
    return get_account_id_from(match.group(1)) if match else "123456789012"


def _request(request: Any, headers: dict[str, str], action: str) -> tuple[dict[str, Any], str, Any]:
    try:
        body = json.loads(request.data or b"{}")
    except ValueError:
        body = {}
    CALLS.append(Call(action, body))
    fault = FAULTS.take(action)
    if fault is not None:
        return body, "", _json_error(fault.code, fault.message, fault.status)
    if REFUSED["sp"]:
        return body, "", _json_error("AccessDeniedException",
                                     f"User is not authorized to perform: savingsplans:{action}", 403)
    return body, _account_of(headers), None


def _describe_savings_plans(request: Any, full_url: str, headers: dict[str, str]) -> Any:
    body, account, refused = _request(request, headers, "DescribeSavingsPlans")
    if refused is not None:
        return refused
    states, ids = body.get("states") or [], body.get("savingsPlanIds") or []
    with _LOCK:
        plans = [copy.deepcopy(p["plan"]) for p in SAVINGS_PLANS.get(account, {}).values()]
    plans = [p for p in plans if (not states or p["state"] in states) and (not ids or p["savingsPlanId"] in ids)]
    return 200, {"Content-Type": "application/json"}, json.dumps({"savingsPlans": plans})


def _rate_value(rate: dict[str, Any], name: str) -> str:
    properties = {p["name"]: p["value"] for p in rate["properties"]}
    return str(properties.get(name, rate.get(name, "")))


def _describe_savings_plan_rates(request: Any, full_url: str, headers: dict[str, str]) -> Any:
    body, account, refused = _request(request, headers, "DescribeSavingsPlanRates")
    if refused is not None:
        return refused
    with _LOCK:
        found = copy.deepcopy(SAVINGS_PLANS.get(account, {}).get(body.get("savingsPlanId") or ""))
    if found is None:
        return _json_error("ResourceNotFoundException", f"Savings Plan {body.get('savingsPlanId')} not found", 400)
    rates = found["rates"]
    for f in body.get("filters") or []:
        rates = [r for r in rates if _rate_value(r, f["name"]) in (f.get("values") or [])]
    return 200, {"Content-Type": "application/json"}, json.dumps({"savingsPlanId": body["savingsPlanId"],
                                                                  "searchResults": rates})


def _install_savings_plans() -> None:
    ram_urls.url_paths["{0}/DescribeSavingsPlans$"] = _describe_savings_plans
    ram_urls.url_paths["{0}/DescribeSavingsPlanRates$"] = _describe_savings_plan_rates
    # Requests signed for "savingsplans" resolve to savingsplans.<region>.amazonaws.com: moto's RAM app serves them.
    backend_index.backend_url_patterns.append(("ram", re.compile(r"https?://savingsplans\.(.+)\.amazonaws\.com")))


_install_savings_plans()


# --- the test-side helpers (methods of EC2TestServer) --------------------------------------------------


def add_reserved_instances(self: EC2TestServer, instance_type: str, zone: str, count: int, *,
                           scope: str = "Availability Zone", offering_class: str = "standard",
                           days: int = 365, account_id: str | None = None) -> str:
    """An active RI bought now for `days` (zonal by default; ``scope="Region"`` for a regional one)."""
    rid = f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}-{secrets.token_hex(6)}"
    start: datetime = CLOCK.now()
    ri = {"ReservedInstancesId": rid, "InstanceType": instance_type, "InstanceCount": count, "Scope": scope,
          "State": "active", "Start": start, "End": start + timedelta(days=days), "Duration": days * 86400,
          "OfferingClass": offering_class, "OfferingType": "No Upfront", "ProductDescription": "Linux/UNIX",
          "InstanceTenancy": "default", "CurrencyCode": "USD", "FixedPrice": 0.0, "UsagePrice": 0.0}
    if scope == "Availability Zone":
        ri["AvailabilityZone"] = zone
    with _LOCK:
        RESERVED_INSTANCES.setdefault(account_id or self.account_id, {})[rid] = ri
    return rid


def add_savings_plan(self: EC2TestServer, rates: dict[str, float], *, commitment: float = 10.0,
                     plan_type: str = "Compute", region: str | None = None, state: str = "active",
                     account_id: str | None = None) -> str:
    """A Savings Plan of `commitment` dollars an hour with a Linux/UNIX shared-tenancy rate per instance type
    in this region (and, to check the filters, the same types' Windows rates at list-ish prices)."""
    plan_id = f"{secrets.token_hex(4)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}-{secrets.token_hex(2)}-{secrets.token_hex(6)}"
    region = region or self.region
    plan = {"savingsPlanId": plan_id, "savingsPlanArn": f"arn:aws:savingsplans::{self.account_id}:savingsplan/{plan_id}",
            "savingsPlanType": plan_type, "state": state, "commitment": f"{commitment:.3f}", "currency": "USD",
            "paymentOption": "No Upfront", "productTypes": ["EC2", "Fargate", "Lambda"], "termDurationInSeconds": 31536000,
            "start": CLOCK.now().isoformat(), "end": (CLOCK.now() + timedelta(days=365)).isoformat()}
    if plan_type == "EC2Instance":
        plan["region"] = region
    found = []
    for itype, rate in sorted(rates.items()):
        for product, usage, factor in (("Linux/UNIX", "BoxUsage", 1.0), ("Windows", "BoxUsage", 3.0)):
            found.append({"rate": f"{rate * factor:.4f}", "currency": "USD", "unit": "Hrs", "productType": "EC2",
                          "serviceCode": "AmazonEC2", "usageType": f"USE1-{usage}:{itype}",
                          "operation": "RunInstances" if product == "Linux/UNIX" else "RunInstances:0002",
                          "properties": [{"name": "region", "value": region}, {"name": "instanceType", "value": itype},
                                         {"name": "productDescription", "value": product},
                                         {"name": "tenancy", "value": "shared"}]})
    with _LOCK:
        SAVINGS_PLANS.setdefault(account_id or self.account_id, {})[plan_id] = {"plan": plan, "rates": found}
    return plan_id


def refuse_commitments(self: EC2TestServer, *, ri: bool = True, sp: bool = True) -> None:
    """DescribeReservedInstances answers UnauthorizedOperation (`ri`) and the Savings Plans calls
    AccessDeniedException (`sp`) until reset: karpweb's role may not read them."""
    REFUSED.update(ri=ri, sp=sp)


_original_reset = EC2TestServer.reset


def _reset(self: EC2TestServer) -> None:
    _original_reset(self)
    RESERVED_INSTANCES.clear()
    SAVINGS_PLANS.clear()
    REFUSED.update(ri=False, sp=False)


EC2TestServer.add_reserved_instances = add_reserved_instances
EC2TestServer.add_savings_plan = add_savings_plan
EC2TestServer.refuse_commitments = refuse_commitments
EC2TestServer.reset = _reset
