"""``SavingsPlans``: the account's active Savings Plans and their EC2 rates (the ``savingsplans`` API:
DescribeSavingsPlans, DescribeSavingsPlanRates).

A Compute or EC2 Instance Savings Plan bills an on-demand instance at the plan's rate for its type
(Linux/UNIX, shared tenancy, this region) while its hourly commitment lasts: the engine prices the
on-demand offering at the rate where it is cheaper than list (scheduling/engine/commitments.py).
SageMaker and Database plans never price an EC2 node and are not read.

One provider for this concern, with its own cache (an hour). Without permission (AccessDenied) the
answer says so, and prices stay the list prices: the overview shows why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .client import UNAUTHORIZED_CODES, Caller
from .interface import CloudAPIError
from .reservedinstances import COMMITMENTS_TTL, Reading, refusal

EC2_PLAN_TYPES = ("Compute", "EC2Instance")
PRODUCT = "Linux/UNIX"


class SavingsPlans:
    def __init__(self, client: Callable[[], Any], call: Caller, clock: Callable[[], datetime], region: str) -> None:
        self._client, self._call, self._clock, self._region = client, call, clock, region
        self._cached: tuple[datetime, Reading] | None = None
        self._lock = threading.Lock()
        self.api_calls = 0

    def with_rates(self) -> Reading:
        """Each active EC2 plan: {savingsPlanId, savingsPlanType, commitment ($/h), end, rates: [{instanceType, rate, usageType}]}."""
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < COMMITMENTS_TTL:
                return self._cached[1]
        try:
            reading = Reading(self._describe())
        except CloudAPIError as exc:
            if exc.code not in UNAUTHORIZED_CODES:
                raise
            action = "savingsplans:DescribeSavingsPlanRates" if exc.operation == "describe_savings_plan_rates" \
                else "savingsplans:DescribeSavingsPlans"
            reading = Reading(refused=refusal(exc, action, "Savings Plans"))
        with self._lock:
            self._cached = (now, reading)
        return reading

    def _describe(self) -> list[dict[str, Any]]:
        client = self._client()
        plans, token = [], None
        while True:
            params: dict[str, Any] = {"states": ["active"]}
            if token:
                params["nextToken"] = token
            self.api_calls += 1
            answer = self._call(client, "describe_savings_plans", **params)
            plans += answer.get("savingsPlans") or []
            token = answer.get("nextToken")
            if not token:
                break
        return [{"savingsPlanId": p["savingsPlanId"], "savingsPlanType": p.get("savingsPlanType", ""),
                 "commitment": float(p.get("commitment") or 0), "end": p.get("end", ""),
                 "rates": self._rates(client, p["savingsPlanId"])}
                for p in plans if self._prices_here(p)]

    def _prices_here(self, plan: dict[str, Any]) -> bool:
        """A Compute plan covers every region; an EC2 Instance plan its own."""
        kind = plan.get("savingsPlanType")
        return kind == "Compute" or (kind == "EC2Instance" and plan.get("region") in (None, "", self._region))

    def _rates(self, client: Any, plan_id: str) -> list[dict[str, Any]]:
        filters = [{"name": "region", "values": [self._region]}, {"name": "productDescription", "values": [PRODUCT]},
                   {"name": "tenancy", "values": ["shared"]}, {"name": "productType", "values": ["EC2"]}]
        found, token = [], None
        while True:
            params: dict[str, Any] = {"savingsPlanId": plan_id, "filters": filters}
            if token:
                params["nextToken"] = token
            self.api_calls += 1
            answer = self._call(client, "describe_savings_plan_rates", **params)
            for rate in answer.get("searchResults") or []:
                properties = {p.get("name"): p.get("value") for p in rate.get("properties") or []}
                if properties.get("instanceType") and "BoxUsage" in (rate.get("usageType") or ""):
                    found.append({"instanceType": properties["instanceType"], "rate": float(rate["rate"]),
                                  "usageType": rate.get("usageType", "")})
            token = answer.get("nextToken")
            if not token:
                return found
