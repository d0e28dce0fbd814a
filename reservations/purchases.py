"""Buying a Capacity Block for a waiting gang (issue #50, "Buy"): an operator of the gang's cluster approves one
offering of its buy advice (reservations/buying.py), then karpweb buys it in control mode (PurchaseCapacityBlock).

- Approve: the operator, the time and the EC2NodeClass that will select the block are recorded in a
  CapacityBlockPurchase (it outlives the advice, which each EC2 sync replaces). One approval at a time per gang.
- Buy, once, with the account's credentials (the cluster's provider), refused (naming the field) unless: karpweb
  controls the cluster (observe mode shows the AWS CLI command instead), the row is approved, the gang still
  waits, EC2 still sells the offering at the approved fee (DescribeCapacityBlockOfferings asked now), and what
  karpweb bought in the account over the last 30 days plus this fee stays within KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT
  (0, the default: buying is off).
- Once: PurchaseCapacityBlock takes no ClientToken, so karpweb makes it idempotent itself. The row is claimed with a
  conditional UPDATE under the account's row lock (two clicks or two workers: one buys, and two gangs cannot both
  pass the limit); the block is bought with the tag karpweb:purchase = a digest of (cluster, gang, offering), and
  before buying karpweb looks for a reservation with that tag (DescribeCapacityReservations): after an uncertain
  outcome (a timeout, a worker killed mid-call) a retry records the block bought before instead of buying again.
- Then: the block's id is added to the EC2NodeClass's capacityReservationSelectorTerms (as a *select* recommendation
  does: validated, conflict-safe, audited on the class); its fee is recorded as paid (reservations/block_fees.py);
  the purchase is audited. The EC2 sync mirrors it (payment-pending, scheduled), and at its start the provisioning
  run plans the gang into it; it drains at its end like every block."""

from __future__ import annotations

import hashlib
import shlex
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from fleet.access import check_may_change
from fleet.models import AwsAccount
from fleet.scope import scope_of
from reservations.models import BuyAdvice, CapacityBlockFee, CapacityBlockPurchase, EC2NodeClass
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.audit import record_change
from scheduling.engine.buying import Waiting, block_labels, compared_with_waiting, pool_admits
from scheduling.engine.labels import INSTANCE_TYPE
from scheduling.engine.requirements import Requirement, RequirementError
from scheduling.engine.world import TERMINAL_PHASES
from scheduling.models import AuditEntry, CapacityType, Mode, NodePool, Offering, Pod
from scheduling.modes import control_refusal, global_mode

PLATFORM = "Linux/UNIX"  # the platform Karpenter's nodes run (EKS-optimized images)
PURCHASE_TAG = "karpweb:purchase"
SPEND_WINDOW = timedelta(days=30)
STALE_CLAIM = timedelta(minutes=10)  # a purchase claimed longer ago than this died with its worker: retried
State = CapacityBlockPurchase.State


class PurchaseRefused(Exception):
    """Why nothing is approved or bought, naming the field (forms and the API show it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message

    @property
    def status(self) -> int:
        """400 for what the request got wrong; 409 when the world or the rules stand in the way."""
        return 400 if self.field in ("nodeClass", "id") else 409


def cli_command(row: BuyAdvice | CapacityBlockPurchase) -> str:
    """The AWS CLI command that buys the offering (observe mode shows it instead of buying)."""
    return (f"aws ec2 purchase-capacity-block --capacity-block-offering-id {shlex.quote(row.offering_id)} "
            f"--instance-platform {shlex.quote(PLATFORM)}")


def purchase_tag(cluster_id: int, namespace: str, gang: str, offering_id: str) -> str:
    """The karpweb:purchase tag's value: the same for every attempt to buy this offering for this gang."""
    return hashlib.sha256(f"{cluster_id}/{namespace}/{gang}/{offering_id}".encode()).hexdigest()[:32]


# --- approve ---------------------------------------------------------------------------------------


def approve(advice_id: int, *, user, source: str, node_class: str = "") -> CapacityBlockPurchase:
    """Record an operator's approval of one offering for its gang (approving it again returns the same row)."""
    advice = BuyAdvice.objects.fleet().select_related("cluster").filter(pk=advice_id).first()
    if advice is None:
        raise PurchaseRefused("id", f"buy advice {advice_id} does not exist (EC2 no longer quotes it?); reload the page")
    check_may_change(advice.cluster_id, advice.cluster.account_id, f"buy advice for {advice.namespace}/{advice.gang}")
    with scope_of(advice):
        live = CapacityBlockPurchase.objects.filter(
            Q(state__in=CapacityBlockPurchase.LIVE) | Q(state=State.PURCHASED, end__gt=timezone.now()),
            namespace=advice.namespace, gang=advice.gang).first()
        if live is not None:
            if live.offering_id == advice.offering_id:
                return live
            raise PurchaseRefused("gang", f"{advice.gang} already has offering {live.offering_id} {live.state} "
                                          f"(#{live.pk}{f', {live.reservation_id}' if live.reservation_id else ''})")
        if not waiting_pods(advice.pods):
            raise PurchaseRefused("gang", f"no pod of {advice.gang} waits any more: nothing to buy a block for")
        chosen = _node_class(advice, node_class)
        try:
            with transaction.atomic():
                row = CapacityBlockPurchase.objects.create(
                    cluster=advice.cluster, namespace=advice.namespace, gang=advice.gang, pods=advice.pods,
                    offering_id=advice.offering_id, instance_type=advice.instance_type,
                    availability_zone=advice.availability_zone, instance_count=advice.instance_count,
                    ultraserver_type=advice.ultraserver_type, start=advice.start, end=advice.end, hours=advice.hours,
                    upfront_fee=advice.upfront_fee, node_class=chosen, approved_by=_name(user),
                    approved_at=timezone.now())
        except IntegrityError:
            raise PurchaseRefused("gang", f"{advice.gang} had another offering approved at the same moment; "
                                          "reload the page") from None
        record_change(user=user, source=source, obj=row, action=AuditEntry.Action.CREATE,
                      changes={"state": [None, State.APPROVED], "offering": [None, row.offering_id],
                               "upfront_fee": [None, str(row.upfront_fee)], "node_class": [None, chosen]})
    return row


def _node_class(advice: BuyAdvice, wanted: str) -> str:
    """The EC2NodeClass that will select the block: the one named, else the only class of the NodePools that admit
    a node of the block (its type and zone, capacity type reserved)."""
    candidates = node_classes_for(advice)
    if wanted:
        if not EC2NodeClass.objects.filter(name=wanted).exists():
            raise PurchaseRefused("nodeClass", f"no EC2NodeClass named {wanted[:253]!r} in cluster {advice.cluster.name}")
        return wanted
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise PurchaseRefused("nodeClass", f"no NodePool admits reserved {advice.instance_type} nodes in "
                                           f"{advice.availability_zone}: add one (capacity type reserved), or name the "
                                           "EC2NodeClass that should select the block")
    raise PurchaseRefused("nodeClass", f"several EC2NodeClasses could select the block ({', '.join(candidates)}): "
                                       "name one")


def node_classes_for(advice: BuyAdvice | CapacityBlockPurchase) -> list[str]:
    """The classes of the NodePools (in the row's cluster) that admit a node of the block."""
    from scheduling.models import InstanceType

    known = InstanceType.objects.filter(name=advice.instance_type).values_list("labels", flat=True).first()
    labels = block_labels({INSTANCE_TYPE: advice.instance_type, **(known or {})}, advice.availability_zone)
    names = set()
    for pool in NodePool.objects.filter(cluster_id=advice.cluster_id).exclude(node_class=None).select_related("node_class"):
        try:
            requirements = [Requirement.of(r["key"], r["operator"], r.get("values") or []) for r in pool.requirements or []]
        except (RequirementError, KeyError, TypeError):
            continue
        if pool_admits(requirements, labels):
            names.add(pool.node_class.name)
    return sorted(names)


# --- buy -------------------------------------------------------------------------------------------


def purchase(purchase_id: int, *, user, source: str, cloud) -> CapacityBlockPurchase:
    """Buy an approved offering once. `cloud`: the provider of the row's cluster, or a function giving it in the
    row's scope (the faces pass the loop's `backends.cloud`)."""
    row = CapacityBlockPurchase.objects.fleet().select_related("cluster", "cluster__account").filter(pk=purchase_id).first()
    if row is None:
        raise PurchaseRefused("id", f"Capacity Block purchase {purchase_id} does not exist")
    check_may_change(row.cluster_id, row.cluster.account_id, f"the Capacity Block purchase for {row.namespace}/{row.gang}")
    with scope_of(row):
        if row.state == State.PURCHASED or (row.state == State.PURCHASING and row.claimed_at
                                            and timezone.now() - row.claimed_at < STALE_CLAIM):
            return row  # a second click: bought once, or being bought by the first
        if row.state == State.FAILED:
            raise PurchaseRefused("approval", f"this purchase failed ({row.error}); approve the offering again to retry")
        if global_mode() != Mode.CONTROL:
            refusal = control_refusal()
            raise PurchaseRefused("mode", "karpweb is in observe mode" + (f" ({refusal})" if refusal else "")
                                  + f": it buys nothing; run this instead: {cli_command(row)}")
        if callable(cloud):
            cloud = cloud()  # the row's cluster's provider, made in its scope (its account's credentials)
        if getattr(cloud, "purchase_capacity_block", None) is None:
            raise PurchaseRefused("cloud", "this cloud sells no Capacity Blocks")
        earlier = _bought_before(cloud, row)
        if earlier is not None:  # an attempt whose outcome was not recorded bought it: record that block
            return _record(row, earlier, row.upfront_fee, user=user, source=source)
        if not waiting_pods(row.pods):
            _fail(row, "gang", f"no pod of {row.gang} waits any more: nothing to buy a block for")
        fee = _still_offered(cloud, row)
        if not claim(row, fee):
            row.refresh_from_db()
            return row  # being bought (or bought) by the first click
        return _buy(cloud, row, fee, user=user, source=source)


def purchase_advice(advice_id: int, *, user, source: str, cloud) -> CapacityBlockPurchase:
    """Buy the offering of this buy advice, which an operator approved for its gang."""
    advice = BuyAdvice.objects.fleet().select_related("cluster").filter(pk=advice_id).first()
    if advice is None:
        raise PurchaseRefused("id", f"buy advice {advice_id} does not exist (EC2 no longer quotes it?); reload the page")
    check_may_change(advice.cluster_id, advice.cluster.account_id, f"buy advice for {advice.namespace}/{advice.gang}")
    row = (CapacityBlockPurchase.objects.fleet().filter(cluster_id=advice.cluster_id, namespace=advice.namespace,
                                                        gang=advice.gang, offering_id=advice.offering_id)
           .exclude(state=State.FAILED).order_by("-pk").first())
    if row is None:
        raise PurchaseRefused("approval", f"nobody approved offering {advice.offering_id} for {advice.gang}: an operator "
                                          "approves it first")
    return purchase(row.pk, user=user, source=source, cloud=cloud)


def claim(row: CapacityBlockPurchase, fee: Decimal) -> bool:
    """approved -> purchasing, once, under the account's row lock, within the spending limit. False: another
    click or worker has it (a claim older than STALE_CLAIM is taken over: its worker died)."""
    now = timezone.now()
    account_id = row.cluster.account_id
    with transaction.atomic():
        list(AwsAccount._base_manager.select_for_update().filter(pk=account_id))
        spent = spent_in_window(account_id, now, excluding=row.pk)
        limit = Decimal(settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT)
        if spent + fee > limit:
            if not limit:
                raise PurchaseRefused("spendLimit", "buying Capacity Blocks is off: KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT "
                                                    f"is 0 (set the dollars karpweb may spend per account in 30 days); "
                                                    f"or run: {cli_command(row)}")
            raise PurchaseRefused("spendLimit", f"${fee:,.2f} more would bring what karpweb bought in account "
                                                f"{row.cluster.account.account_id} over the last 30 days to "
                                                f"${spent + fee:,.2f}, over KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT "
                                                f"(${limit:,.2f})")
        claimable = Q(state=State.APPROVED) | Q(state=State.PURCHASING, claimed_at__lt=now - STALE_CLAIM)
        return bool(CapacityBlockPurchase.objects.fleet().filter(claimable, pk=row.pk)
                    .update(state=State.PURCHASING, claimed_at=now, upfront_fee=fee))


def spent_in_window(account_id: int, now, *, excluding: int | None = None) -> Decimal:
    """What karpweb bought (or is buying) in the account over the last 30 days ($)."""
    rows = (CapacityBlockPurchase.objects.fleet()
            .filter(cluster__account_id=account_id, state__in=[State.PURCHASING, State.PURCHASED],
                    claimed_at__gte=now - SPEND_WINDOW).exclude(pk=excluding))
    return rows.aggregate(total=Sum(Coalesce("paid_fee", "upfront_fee")))["total"] or Decimal(0)


def _still_offered(cloud, row: CapacityBlockPurchase) -> Decimal:
    """The offering's fee as EC2 quotes it now; refused when it is no longer sold, or dearer than approved."""
    ultra = {"ultraserver_type": row.ultraserver_type,
             "ultraserver_count": _ultraserver_count(row)} if row.ultraserver_type else {}
    try:
        quoted = cloud.capacity_block_offerings(row.instance_type, row.instance_count, row.hours, fresh=True, **ultra)
    except CloudAPIError as error:
        raise PurchaseRefused("offering", f"EC2 did not say whether it still sells {row.offering_id}: {error}") from None
    offer = next((o for o in quoted if o.get("CapacityBlockOfferingId") == row.offering_id), None)
    if offer is None:
        _fail(row, "offering", f"EC2 no longer sells offering {row.offering_id} (sold, or its start has passed): "
                               "approve another")
    fee = Decimal(str(offer.get("UpfrontFee") or "0")).quantize(Decimal("0.01"))
    if fee > row.upfront_fee:
        _fail(row, "offering", f"EC2 asks ${fee:,.2f} for {row.offering_id} now, more than the ${row.upfront_fee:,.2f} "
                               "approved: approve it again at the new fee")
    return fee


def _ultraserver_count(row: CapacityBlockPurchase) -> int:
    from scheduling.engine.buying import ULTRASERVER_TYPES

    size = dict(ULTRASERVER_TYPES.get(row.instance_type, ())).get(row.ultraserver_type) or row.instance_count
    return max(1, row.instance_count // size)


def _bought_before(cloud, row: CapacityBlockPurchase) -> dict | None:
    """The block an earlier attempt bought for this gang and offering (found by its karpweb:purchase tag), if any."""
    try:
        found = cloud.reservations_tagged(PURCHASE_TAG, purchase_tag(row.cluster_id, row.namespace, row.gang, row.offering_id))
    except CloudAPIError as error:
        raise PurchaseRefused("offering", f"EC2 did not say whether this block was bought already: {error}") from None
    return found[0] if found else None


def _buy(cloud, row: CapacityBlockPurchase, fee: Decimal, *, user, source: str) -> CapacityBlockPurchase:
    tag = purchase_tag(row.cluster_id, row.namespace, row.gang, row.offering_id)
    try:
        bought = _bought_before(cloud, row) or cloud.purchase_capacity_block(
            row.offering_id, platform=PLATFORM, tags={PURCHASE_TAG: tag, "karpweb:gang": f"{row.namespace}/{row.gang}"[:256]})
    except (CloudAPIError, PurchaseRefused) as error:
        message = error.message if isinstance(error, PurchaseRefused) else f"EC2 refused: {error.code}: {error.message}"
        CapacityBlockPurchase.objects.fleet().filter(pk=row.pk).update(state=State.FAILED, error=message)
        record_change(user=user, source=source, obj=row, action=AuditEntry.Action.CHANGE,
                      changes={"state": [State.APPROVED, State.FAILED], "error": [None, message]})
        raise PurchaseRefused("offering", message) from None
    return _record(row, bought, fee, user=user, source=source)


def _record(row: CapacityBlockPurchase, bought: dict, fee: Decimal, *, user, source: str) -> CapacityBlockPurchase:
    """The block bought, once: on the row, as the block's paid fee, in the audit log and the EC2NodeClass's terms."""
    reservation_id = bought.get("CapacityReservationId") or ""
    now = timezone.now()
    recorded = CapacityBlockPurchase.objects.fleet().filter(pk=row.pk, state__in=CapacityBlockPurchase.LIVE).update(
        state=State.PURCHASED, purchased_by=_name(user), purchased_at=now, reservation_id=reservation_id, paid_fee=fee,
        claimed_at=Coalesce("claimed_at", Value(now)), error="")
    row.refresh_from_db()
    if not recorded:
        return row  # another worker recorded it
    CapacityBlockFee.objects.update_or_create(reservation_id=reservation_id, defaults={"paid_fee": fee})
    record_change(user=user, source=source, obj=row, action=AuditEntry.Action.CHANGE,
                  changes={"state": [State.APPROVED, State.PURCHASED], "reservation": [None, reservation_id],
                           "fee_paid": [None, str(fee)]})
    _select(row, reservation_id, user=user, source=source)
    return row


def _select(row: CapacityBlockPurchase, reservation_id: str, *, user, source: str) -> None:
    """The block's id term added to the approved EC2NodeClass (saved as the selector-term editor saves). The block is
    bought whatever happens here: a class that cannot take it now is said on the row."""
    for _attempt in range(2):  # a concurrent edit of the class: read it again once
        node_class = EC2NodeClass.objects.filter(name=row.node_class).first()
        if node_class is None:
            problem = f"EC2NodeClass {row.node_class} is gone: add {{id: {reservation_id}}} to a class's selector terms"
            break
        terms = list(node_class.capacity_reservation_selector_terms or [])
        if {"id": reservation_id} in terms:
            return
        try:
            save_selector_terms(node_class, [*terms, {"id": reservation_id}], node_class.resource_version, user=user,
                                source=source)
            return
        except SelectorTermConflict as conflict:
            problem = str(conflict)
        except InvalidSelectorTerms as invalid:
            problem = f"EC2NodeClass {node_class.name}: {invalid}"
            break
    CapacityBlockPurchase.objects.fleet().filter(pk=row.pk).update(error=f"bought, but not selected yet: {problem}")


def _fail(row: CapacityBlockPurchase, field: str, message: str):
    CapacityBlockPurchase.objects.fleet().filter(pk=row.pk, state=State.APPROVED).update(state=State.FAILED, error=message)
    raise PurchaseRefused(field, message)


def _name(user) -> str:
    return getattr(user, "get_username", lambda: "")() or "anonymous"


def waiting_pods(keys) -> list[str]:
    """Of these pods (namespace/name), those that still wait for a node."""
    wanted = {tuple(str(k).split("/", 1)) for k in keys or () if "/" in str(k)}
    rows = Pod.objects.filter(node_name="").exclude(phase__in=TERMINAL_PHASES).filter(
        namespace__in={n for n, _ in wanted}, name__in={p for _, p in wanted}).values_list("namespace", "name")
    return sorted(f"{n}/{p}" for n, p in rows if (n, p) in wanted)


# --- compared with waiting ----------------------------------------------------------------------


def waiting_for(advice: BuyAdvice, now, prices: dict[str, float] | None = None) -> Waiting:
    """Buying compared with waiting for this offering: the hours until the block starts, and what the same nodes
    would list at on demand where EC2 offers the type on demand now (`prices`: on_demand_offered of a page's rows)."""
    prices = on_demand_offered([advice.instance_type]) if prices is None else prices
    return compared_with_waiting(advice.start, now, advice.hours, advice.upfront_fee, advice.nodes_used,
                                 prices.get(advice.instance_type))


def on_demand_offered(instance_types) -> dict[str, float]:
    """The lowest on-demand price of each type where the catalogue offers it available now (one query)."""
    prices: dict[str, float] = {}
    for name, price in (Offering.objects.filter(instance_type__name__in=set(instance_types), reservation=None,
                                                capacity_type=CapacityType.ON_DEMAND, available=True)
                        .values_list("instance_type__name", "price")):
        prices[name] = min(price, prices.get(name, price))
    return prices


def purchases_for(advice_rows) -> dict[tuple, CapacityBlockPurchase]:
    """The live or bought purchase of each advice row's gang and offering, by BuyAdvice.key."""
    rows = list(advice_rows)
    if not rows:
        return {}
    found = CapacityBlockPurchase.objects.fleet().filter(
        cluster_id__in={a.cluster_id for a in rows}, offering_id__in={a.offering_id for a in rows}).exclude(
        state=State.FAILED)
    return {(p.cluster_id, p.namespace, p.gang, p.offering_id): p for p in found}
