"""What the reservation doctor asks AWS (reservations/doctor.py runs it in the EC2 step, never on a
page load): AWS RAM invitations still pending, and IAM's policy simulation of a role against the
actions it needs. Each answer is returned as plain data; an error is the caller's to record."""

from __future__ import annotations

from typing import Any

from .client import Caller

CAPACITY_RESERVATION_ARN = ":capacity-reservation/"
MAX_PAGES = 100  # a guard: a repeating token must not loop forever


def pending_invitations(ram: Any, call: Caller) -> list[dict[str, Any]]:
    """The account's PENDING resource share invitations that hold capacity reservations, each with the
    reservation ids it would share (ram:ListPendingInvitationResources)."""
    invitations, params = [], {}
    for _ in range(MAX_PAGES):
        page = call(ram, "get_resource_share_invitations", **params)
        invitations += [i for i in page.get("resourceShareInvitations") or [] if i.get("status") == "PENDING"]
        token = page.get("nextToken")
        if not token or token == params.get("nextToken"):
            break
        params = {"nextToken": token}
    found = []
    for invitation in invitations:
        arn = invitation["resourceShareInvitationArn"]
        resources = call(ram, "list_pending_invitation_resources", resourceShareInvitationArn=arn).get("resources") or []
        ids = sorted(r["arn"].rsplit("/", 1)[-1] for r in resources if CAPACITY_RESERVATION_ARN in (r.get("arn") or ""))
        if ids:
            found.append({"arn": arn, "share": invitation.get("resourceShareName") or "",
                          "sender": invitation.get("senderAccountId") or "", "reservationIds": ids})
    return found


def simulate(iam: Any, call: Caller, principal_arn: str, actions: list[str]) -> dict[str, str]:
    """iam:SimulatePrincipalPolicy: action -> allowed | implicitDeny | explicitDeny."""
    decisions: dict[str, str] = {}
    params: dict[str, Any] = {"PolicySourceArn": principal_arn, "ActionNames": list(actions)}
    for _ in range(MAX_PAGES):
        page = call(iam, "simulate_principal_policy", **params)
        for result in page.get("EvaluationResults") or []:
            decisions[result["EvalActionName"]] = result.get("EvalDecision") or "implicitDeny"
        if not page.get("IsTruncated") or not page.get("Marker"):
            break
        params["Marker"] = page["Marker"]
    return decisions


def role_of(caller_arn: str) -> str:
    """The IAM role behind an STS caller ARN (assumed-role/NAME/session -> role/NAME); others unchanged."""
    if ":assumed-role/" not in caller_arn:
        return caller_arn
    head, rest = caller_arn.split(":assumed-role/", 1)
    return head.replace(":sts::", ":iam::") + ":role/" + rest.split("/", 1)[0]


def caller_role(sts: Any, call: Caller) -> str:
    """The role karpweb's own credentials work as (sts:GetCallerIdentity needs no permission)."""
    return role_of(call(sts, "get_caller_identity").get("Arn") or "")
