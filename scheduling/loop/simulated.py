"""The simulated world: an EC2 and a Kubernetes behind the loop's adapter interfaces, kept in the
database, so that karpweb shows itself working with no AWS account and no cluster.

- EC2: the CapacityReservation rows are the truth; launches take a unit with a conditional UPDATE
  (never over-committing), fail with ReservationCapacityExceeded when a reservation is full, and
  are idempotent on their client token; EC2 reclaims capacity-block instances 30 minutes (60 for
  UltraServer) before the block ends and moves instances of an ended ODCR to plain on-demand.
- Kubernetes: NodeClaims, Nodes and Pods are the rows; a launched NodeClaim registers its Node at
  once; a small kube-scheduler binds pending pods to nodes with room using the engine's bindings;
  workloads arrive and leave on a fixed pattern.
- The clock is Django's (`timezone.now()`): tests move it with time-machine.
"""

import datetime
import math
import random
import re

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from fleet.defaults import UNKNOWN_ACCOUNT_ID
from fleet.scope import working_cluster
from reservations.models import CapacityReservation, used_allocations
from scheduling.adapters.ec2.interface import CloudAPIError, InstanceMembership, LaunchResult, TerminateResult
from scheduling.adapters.ec2.launch import NODECLAIM_TAG
from scheduling.adapters.ec2.reservations import INVENTORY_STATES
from scheduling.adapters.kube.interface import Condition, DemotionResult, DrainResult, NodeClaimRequest
from scheduling.adapters.kube.sync import pod_requests
from scheduling.engine.capacityblocks import capacity_block_timing
from scheduling.engine.labels import RESERVATION_LABELS
from scheduling.engine.quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from scheduling import simulated_network
from scheduling.models import CapacityType, InstanceType, Node, NodeClaim, NodePool, Pod, SimulatedInstance
from scheduling.world import node_allocatable

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SPLIT_TOKEN_TAG = "karpweb.io/split-client-token"
SOLD_OFFERING_TAG = "karpweb.io/simulated-offering"  # the offering a simulated Capacity Block was bought from  # a split's client token, kept on the reservation it made
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
RESERVATION_ID_LABEL = "karpenter.k8s.aws/capacity-reservation-id"


class SimulatedCloud:
    """CloudProvider (scheduling/adapters/ec2/interface.py) on the database."""

    keeps_reservations_in_database = True  # its launches count units there: nothing to refresh

    def launch(self, request) -> LaunchResult:
        existing = SimulatedInstance.objects.filter(client_token=request.nodeclaim_name).first()
        if existing:  # a retried launch: the same instance, never a second one
            return _result(existing)
        errors = []
        for offering in request.offerings:
            reservation_id = offering.reservation_id
            if reservation_id and offering.reservation_group_arn:
                reservation_id = _take_group_unit(offering)  # EC2 picks a member of the group with room
            elif reservation_id and not _take_unit(reservation_id):
                reservation_id = None
            elif not reservation_id and offering.capacity_type == CapacityType.ON_DEMAND and request.open_reservations:
                reservation_id = _take_open_unit(offering.instance_type, offering.zone)  # open mode; may be None
            if offering.reservation_id and not reservation_id:
                errors.append(("ReservationCapacityExceeded",
                               f"reservation {offering.reservation_group_arn or offering.reservation_id} has no available instance"))
                continue
            image, subnet, groups = _launched_with(request, offering)
            instance = SimulatedInstance.objects.create(
                instance_id=f"i-{random.getrandbits(68):017x}", client_token=request.nodeclaim_name,
                instance_type=offering.instance_type, zone=offering.zone, capacity_type=offering.capacity_type,
                reservation_id=reservation_id or "", reservation_type=offering.reservation_type or "",
                image_id=image, subnet_id=subnet, security_group_ids=groups,
            )
            return _result(instance)
        code, message = errors[-1] if errors else ("UnfulfillableCapacity", "no offering to launch")
        return LaunchResult(error_code=code, error_message=message,
                            reservations_marked_unavailable=[o.reservation_id for o in request.offerings if o.reservation_id])

    # Reservation actions on the database (the simulated EC2 keeps its reservations there).
    def reservations_by_id(self, reservation_ids) -> list[dict]:
        from reservations.models import CapacityReservation

        return [{"CapacityReservationId": r.reservation_id, "TotalInstanceCount": r.total_instance_count,
                 "EndDate": r.end_date, "State": r.state}
                for r in CapacityReservation.objects.filter(reservation_id__in=list(reservation_ids))]

    def modify_reservation(self, reservation_id, *, instance_count=None, end_date=None) -> None:
        from reservations.models import CapacityReservation

        reservation = CapacityReservation.objects.get(reservation_id=reservation_id)
        if instance_count is not None:
            used = reservation.total_instance_count - reservation.available_instance_count
            if instance_count < used:
                raise CloudAPIError("InvalidParameterValue", f"The instance count {instance_count} is below the {used} "
                                    f"instances running in {reservation_id}", "modify_capacity_reservation")
            reservation.available_instance_count += instance_count - reservation.total_instance_count
            reservation.total_instance_count = instance_count
        if end_date is not None:
            reservation.end_date = end_date
        reservation.save()

    def cancel_reservation(self, reservation_id) -> None:
        from reservations.models import CapacityReservation

        CapacityReservation.objects.filter(reservation_id=reservation_id).update(state=CapacityReservation.State.CANCELLED)

    def split_reservation(self, reservation_id, instance_count, *, client_token) -> dict:
        """CreateCapacityReservationBySplitting on the rows, with EC2's rules (see _relocatable)."""
        from reservations.models import ReservationVisibility

        with transaction.atomic():
            done = CapacityReservation.objects.fleet().filter(**{f"tags__{SPLIT_TOKEN_TAG}": client_token}).first()  # SQLite has no JSON contains
            if done is not None:  # a retry: the first split's reservation
                return _described(done)
            source = _relocatable(reservation_id, "source", "create_capacity_reservation_by_splitting")
            _check_count(source, instance_count, min(source.available_instance_count, source.total_instance_count - 1),
                         "create_capacity_reservation_by_splitting")
            new = CapacityReservation.objects.fleet().get(pk=source.pk)
            new.pk = new.id = None
            new._state.adding = True
            new.reservation_id = f"cr-{random.getrandbits(68):017x}"
            new.arn = source.arn.rsplit("/", 1)[0] + "/" + new.reservation_id if source.arn else ""
            new.total_instance_count = new.available_instance_count = instance_count
            new.committed_instance_count, new.commitment_end_date = None, None
            new.tags, new.create_date = {SPLIT_TOKEN_TAG: client_token}, timezone.now()
            new.save()
            # Saving it recorded its owner's account already (reservations.models._reservation_saved): the others too.
            ReservationVisibility.objects.bulk_create([ReservationVisibility(reservation=new, account_id=v.account_id, shared=False)
                                                       for v in source.visibilities.filter(shared=False)],
                                                      ignore_conflicts=True)
            _resize(source, -instance_count)
        return _described(new)

    def move_reservation_instances(self, reservation_id, destination_id, instance_count, *, client_token) -> dict:
        """MoveCapacityReservationInstances on the rows: one shape, only available units (see _relocatable)."""
        operation = "move_capacity_reservation_instances"
        with transaction.atomic():
            source = _relocatable(reservation_id, "source", operation)
            destination = _relocatable(destination_id, "destination", operation)
            for field in ("owner_id", "instance_type", "instance_platform", "availability_zone", "tenancy",
                          "placement_group_arn", "end_date"):
                if getattr(source, field) != getattr(destination, field) or source.pk == destination.pk:
                    raise CloudAPIError("InvalidParameterValue", f"The destination Capacity Reservation must have the "
                                        f"source's {field.replace('_', ' ')} and be another reservation", operation)
            _check_count(source, instance_count, source.available_instance_count, operation)
            _resize(source, -instance_count)
            _resize(destination, instance_count)
        return {"InstanceCount": instance_count}

    def lend_reservation_units(self, reservation_id, instance_count, *, client_token) -> dict:
        """CreateInterruptibleCapacityReservationAllocation on the row: only available units of an active ODCR with
        no end date; nobody borrows in the simulated world, so the lent units simply leave its available count."""
        operation = "create_interruptible_capacity_reservation_allocation"
        with transaction.atomic():
            source = CapacityReservation.objects.select_for_update().get(reservation_id=reservation_id)
            if (source.interruptible_allocation or {}).get("Token") == client_token:
                return {"SourceCapacityReservationId": reservation_id, "TargetInstanceCount": source.lent_target, "Status": "active"}
            if source.state != "active" or source.end_date is not None or source.is_capacity_block or source.lent_count:
                raise CloudAPIError("InvalidParameterValue", f"{reservation_id} cannot lend interruptible capacity", operation)
            _check_count(source, instance_count, source.available_instance_count, operation)
            source.interruptible_allocation = {"InstanceCount": instance_count, "TargetInstanceCount": instance_count,
                                               "Status": "active", "InterruptionType": "adhoc", "Token": client_token}
            source.available_instance_count -= instance_count
            source.save(update_fields=["interruptible_allocation", "available_instance_count"])
        return {"SourceCapacityReservationId": reservation_id, "TargetInstanceCount": instance_count, "Status": "active"}

    def reclaim_lent_units(self, reservation_id, target_count) -> dict:
        """UpdateInterruptibleCapacityReservationAllocation on the row: no borrower runs here, so the units are back at once."""
        with transaction.atomic():
            source = CapacityReservation.objects.select_for_update().get(reservation_id=reservation_id)
            back = max(source.lent_count - target_count, 0)
            source.interruptible_allocation = {**(source.interruptible_allocation or {}), "InstanceCount": target_count,
                                               "TargetInstanceCount": target_count, "Status": "active"}
            source.available_instance_count += back
            source.save(update_fields=["interruptible_allocation", "available_instance_count"])
        return {"SourceCapacityReservationId": reservation_id, "InstanceCount": target_count,
                "TargetInstanceCount": target_count, "Status": "active"}

    def capacity_block_extension_offerings(self, reservation_id) -> list:
        from scheduling.simulated_extensions import extension_offerings

        return extension_offerings(reservation_id)  # a day or two more of an active block

    def purchase_capacity_block_extension(self, offering_id, reservation_id) -> dict:
        from scheduling.simulated_extensions import purchase_extension

        return purchase_extension(offering_id, reservation_id)

    def capacity_block_offerings(self, instance_type, instance_count, hours, *, ultraserver_type="", **_) -> list[dict]:
        from scheduling.simulated_extensions import block_offerings

        if ultraserver_type:
            return []  # the simulated EC2 sells no UltraServers
        sold = set(CapacityReservation.objects.fleet().filter(tags__has_key=SOLD_OFFERING_TAG)
                   .values_list(f"tags__{SOLD_OFFERING_TAG}", flat=True))
        return [offer for offer in block_offerings(instance_type, instance_count, hours, timezone.now())
                if offer["CapacityBlockOfferingId"] not in sold]  # new blocks for waiting GPU gangs, each sold once

    def purchase_capacity_block(self, offering_id, *, platform, tags) -> dict:
        """PurchaseCapacityBlock on the rows: a scheduled Capacity Block of the offering, active from its start
        (tick_ec2), drained and reclaimed at its end like every block."""
        with transaction.atomic():
            wanted = _offering_shape(offering_id)
            offer = next((o for o in self.capacity_block_offerings(*wanted) if o["CapacityBlockOfferingId"] == offering_id),
                         None) if wanted else None
            if offer is None:
                raise CloudAPIError("InvalidParameterValue", f"The offering {offering_id} is not for sale (sold, or its "
                                    "start has passed)", "purchase_capacity_block")
            cluster = working_cluster()
            block = CapacityReservation.objects.create(
                reservation_id=f"cr-{random.getrandbits(68):017x}", owner_id=cluster.account.account_id,
                region=cluster.region, instance_type=offer["InstanceType"], instance_platform=platform,
                availability_zone=offer["AvailabilityZone"], total_instance_count=offer["InstanceCount"],
                available_instance_count=0, state=CapacityReservation.State.SCHEDULED,
                reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK,
                end_date_type=CapacityReservation.EndDateType.LIMITED, create_date=timezone.now(),
                start_date=offer["StartDate"], end_date=offer["EndDate"],
                tags={**tags, SOLD_OFFERING_TAG: offering_id})
        return {**_described(block), "State": "scheduled", "StartDate": block.start_date, "EndDate": block.end_date}

    def reservations_tagged(self, key, value) -> list[dict]:
        return [_described(r) for r in CapacityReservation.objects.fleet().filter(**{f"tags__{key}": value})]

    def cluster_launch_templates(self) -> list:
        """The simulated world launches without launch templates: Karpenter made none here."""
        return []

    def terminate(self, instance_ids) -> TerminateResult:
        result = TerminateResult()
        for instance in SimulatedInstance.objects.filter(instance_id__in=instance_ids, state="running"):
            _stop(instance)
            result.terminating.append(instance.instance_id)
        result.not_found = sorted(set(instance_ids) - set(result.terminating))
        return result

    def describe_instances(self, instance_ids=None, tags=None) -> list[InstanceMembership]:
        instances = SimulatedInstance.objects.filter(state="running")
        if instance_ids is not None:
            instances = instances.filter(instance_id__in=instance_ids)
        if tags:
            # The one tag the simulated EC2 knows: the NodeClaim, which is each launch's client token.
            if set(tags) != {NODECLAIM_TAG}:
                return []
            instances = instances.filter(client_token=tags[NODECLAIM_TAG])
        return [
            InstanceMembership(
                instance_id=i.instance_id, instance_type=i.instance_type, zone=i.zone, state=i.state,
                capacity_type=i.capacity_type, reservation_id=_reserved_in(i),
                reservation_type=i.reservation_type or None, interruptible=False,
                capacity_reservation_preference=_preference(i),
                launch_time=i.launched_at, tags={NODECLAIM_TAG: i.client_token},
                open_reservation_id=_open_in(i), image_id=i.image_id, subnet_id=i.subnet_id,
                security_group_ids=tuple(sorted(i.security_group_ids or ())),
            )
            for i in instances
        ]


def _launched_with(request, offering) -> tuple[str, str, list[str]]:
    """The image, subnet and security groups the EC2NodeClass resolves to for this launch."""
    node_class = getattr(request, "node_class", None)
    if node_class is None:
        return "", "", []
    arch, variant = node_class.shapes.get(offering.instance_type, ("amd64", "standard"))
    return simulated_network.launched_with(dict(node_class.spec or {}), offering.zone, arch, variant)


def resolve_node_classes(now=None) -> int:
    """The simulated EC2's answer to each launch-configured EC2NodeClass's selector terms
    (status.amis, subnets, securityGroups); returns how many changed."""
    from reservations.models import EC2NodeClass
    from scheduling.loop.nodeclass_launch import launch_configured

    changed = 0
    for node_class in EC2NodeClass.objects.all():
        if not launch_configured(node_class.spec):
            continue
        status = {**(node_class.status_launch or {}), **simulated_network.resolve(node_class.spec or {})}
        if status != node_class.status_launch:
            node_class.status_launch = status
            node_class.save(update_fields=["status_launch"])
            changed += 1
    return changed


def _reserved_in(instance: SimulatedInstance) -> str | None:
    return instance.reservation_id if instance.reservation_id and instance.capacity_type == CapacityType.RESERVED else None


def _open_in(instance: SimulatedInstance) -> str | None:
    """An on-demand instance of an EC2NodeClass in open mode that EC2 put in an open reservation."""
    return instance.reservation_id if instance.reservation_id and instance.capacity_type == CapacityType.ON_DEMAND else None


def _preference(instance: SimulatedInstance) -> str:
    if _reserved_in(instance):
        return "capacity-reservations-only"
    return "open" if _open_in(instance) else "none"


def _take_group_unit(offering) -> str | None:
    """A launch that targets a Capacity Reservation group: the planned member if it has room, else
    another active ODCR of the group with the same type and zone (EC2 picks one with room)."""
    from reservations.models import CapacityReservationGroup

    group = CapacityReservationGroup.objects.filter(arn=offering.reservation_group_arn).first()
    members = list(group.reservation_ids) if group else []
    ordered = [offering.reservation_id] + sorted(set(members) - {offering.reservation_id})
    for rid in ordered:
        if rid != offering.reservation_id and not CapacityReservation.objects.filter(
                reservation_id=rid, instance_type=offering.instance_type, availability_zone=offering.zone,
                reservation_type=CapacityReservation.ReservationType.DEFAULT).exists():
            continue
        if _take_unit(rid):
            return rid
    return None


def _take_open_unit(instance_type: str, zone: str) -> str | None:
    """EC2's open matching: an on-demand launch with preference open runs in an active open ODCR of
    its type and zone with room, when there is one."""
    now = timezone.now()
    candidates = CapacityReservation.objects.filter(
        instance_type=instance_type, availability_zone=zone, state=CapacityReservation.State.ACTIVE,
        instance_match_criteria=CapacityReservation.MatchCriteria.OPEN,
        reservation_type=CapacityReservation.ReservationType.DEFAULT, available_instance_count__gt=0,
    ).exclude(end_date__lte=now).order_by("reservation_id").values_list("reservation_id", flat=True)
    for rid in candidates:
        if _take_unit(rid):
            return rid
    return None


def _take_unit(reservation_id: str) -> bool:
    """Conditional UPDATE: of two launches racing for the last unit, one wins."""
    now = timezone.now()
    return bool(CapacityReservation.objects.filter(
        reservation_id=reservation_id, state=CapacityReservation.State.ACTIVE, available_instance_count__gt=0,
    ).exclude(end_date__lte=now).update(available_instance_count=F("available_instance_count") - 1))


def _stop(instance: SimulatedInstance) -> None:
    instance.state = "terminated"
    instance.terminated_at = timezone.now()
    instance.save(update_fields=["state", "terminated_at"])
    if instance.reservation_id:
        CapacityReservation.objects.filter(
            reservation_id=instance.reservation_id, available_instance_count__lt=F("total_instance_count")
        ).update(available_instance_count=F("available_instance_count") + 1)


def _result(instance: SimulatedInstance) -> LaunchResult:
    reserved_in = _reserved_in(instance)
    return LaunchResult(
        instance_id=instance.instance_id, instance_type=instance.instance_type, zone=instance.zone,
        capacity_type=instance.capacity_type, reservation_id=reserved_in,
        reservation_type=(instance.reservation_type or None) if reserved_in else None,
        open_reservation_id=_open_in(instance),
    )


class SimulatedCluster:
    """The parts of ClusterAdapter (scheduling/adapters/kube/interface.py) the loop uses, on the rows."""

    keeps_events = False  # no API server to keep Events: the decision log says the same

    def create_events(self, events: list) -> int:
        return 0

    def create_nodeclaim(self, request: NodeClaimRequest) -> dict:
        pool = NodePool.objects.filter(name=request.nodepool).select_related("node_class").first()
        claim = NodeClaim.objects.create(
            name=request.name, node_pool=pool, node_class=pool.node_class if pool else None,
            labels=request.labels, requirements=request.requirements, resources=request.resources,
            annotations=request.annotations, expire_after=request.expire_after or "",
            created_at=timezone.now(), synced_at=timezone.now(),
        )
        return {"metadata": {"name": claim.name}}

    def delete_nodeclaim(self, name: str) -> bool:
        """As the claim's termination finalizer would: the node's pods go back to pending, the Node
        goes, the instance is terminated, then the claim."""
        claim = NodeClaim.objects.filter(name=name).first()
        if claim is None:
            return False
        node = Node.objects.filter(node_claim=claim).first()
        if node is not None:
            Pod.objects.filter(node=node).update(node=None, node_name="", phase="Pending")
            node.delete()
        if claim.provider_id:
            SimulatedCloud().terminate([claim.instance_id])
        claim.delete()
        return True

    def set_reservation_label(self, nodeclaim: str, reservation_id: str) -> dict:
        claim = NodeClaim.objects.get(name=nodeclaim)
        for obj in (claim, Node.objects.filter(node_claim=claim).first()):
            if obj is not None:
                obj.labels = {**obj.labels, RESERVATION_ID_LABEL: reservation_id}
                obj.save(update_fields=["labels"])
        return {"metadata": {"name": nodeclaim, "labels": claim.labels}}

    def set_conditions(self, kind: str, name: str, conditions: list[Condition], status_fields: dict | None = None) -> dict:
        model = {"NodeClaim": NodeClaim, "NodePool": NodePool}.get(kind)
        if model is None:
            from reservations.models import EC2NodeClass as model
        obj = model.objects.get(name=name)
        for condition in conditions:
            obj.set_condition(condition.type, condition.status, condition.reason, condition.message)
        obj.save(update_fields=["conditions"])
        if kind == "NodeClaim" and (status_fields or {}).get("providerID"):
            register_node(obj, status_fields["providerID"])
        return {"metadata": {"name": name}, "status": {"conditions": obj.conditions}}

    def demote(self, *, nodeclaim=None, node=None) -> DemotionResult:
        result = DemotionResult()
        for model, name, label in ((NodeClaim, nodeclaim, "NodeClaim"), (Node, node, "Node")):
            obj = model.objects.filter(name=name).first() if name else None
            if obj is None:
                continue
            removed = sorted(key for key in obj.labels if key in RESERVATION_LABELS)
            obj.labels = {k: v for k, v in obj.labels.items() if k not in RESERVATION_LABELS}
            obj.labels[CAPACITY_TYPE_LABEL] = CapacityType.ON_DEMAND
            obj.capacity_type = CapacityType.ON_DEMAND
            obj.reservation = None
            obj.reservation_label = ""
            obj.save(update_fields=["labels", "capacity_type", "reservation", "reservation_label"])
            result.changed[f"{label} {name}"] = removed
        return result

    def drain(self, node: str, *, termination_time: datetime.datetime | None = None) -> DrainResult:
        """One drain pass on the rows: tainted (cordoned), every pod moved back to Pending at once
        (no kubelet to wait for) except do-not-disrupt ones until the termination time."""
        result = DrainResult(node=node)
        row = Node.objects.filter(name=node).first()
        if row is None:
            return result
        row.unschedulable = True
        row.save(update_fields=["unschedulable"])
        result.cordoned = True
        past_deadline = termination_time is not None and timezone.now() >= termination_time
        pods = list(row.pods.all())
        held = [p for p in pods if not past_deadline and (p.annotations or {}).get(DO_NOT_DISRUPT) == "true"]
        for pod in held:
            result.blocked[str(pod)] = f"annotated {DO_NOT_DISRUPT}: waits for the node's termination time"
        moved = [p for p in pods if p not in held]
        Pod.objects.filter(pk__in=[p.pk for p in moved]).update(node=None, node_name="", phase="Pending")
        result.evicted = [str(p) for p in moved]
        result.remaining = sorted(str(p) for p in held)
        return result

    def delete_node(self, name: str) -> bool:
        return Node.objects.filter(name=name).delete()[0] > 0

    def pending_volume_attachments(self, node: str) -> list[str]:
        return []  # the simulated world has no volumes


def register_node(claim: NodeClaim, provider_id: str) -> Node:
    """The simulated kubelet: the instance boots and its Node joins, labelled from the claim."""
    instance_type = InstanceType.objects.filter(name=claim.instance_type).first()
    room = node_allocatable(instance_type, claim.node_class) if instance_type else {}
    name = f"ip-10-1-{random.randint(0, 255)}-{random.randint(1, 254)}.ec2.internal"
    labels = {**claim.labels, "kubernetes.io/hostname": name}
    node, _ = Node.objects.update_or_create(node_claim=claim, defaults=dict(
        name=name, node_pool=claim.node_pool, instance_type=claim.instance_type, zone=claim.zone,
        capacity_type=claim.capacity_type, reservation=claim.reservation, reservation_label=claim.reservation_label,
        labels=labels, provider_id=provider_id, ready=True, created_at=timezone.now(), synced_at=timezone.now(),
        taints=claim.node_pool.taints if claim.node_pool else [],
        # What the engine planned for: the VM overhead, kube-reserved and eviction thresholds off.
        allocatable_cpu_millicores=room.get(CPU, 0), allocatable_memory_bytes=room.get(MEMORY, 0),
        allocatable_pods=room.get(PODS, 110),
        allocatable_extended={k: v for k, v in room.items() if k not in (CPU, MEMORY, PODS, EPHEMERAL_STORAGE)},
    ))
    NodeClaim.objects.filter(pk=claim.pk).update(node_name=name, registered_at=timezone.now(), initialized_at=timezone.now())
    return node


# --- the world's own events --------------------------------------------------------------------

WORKLOADS = (
    # app, NodePool-steering node selector, cpu, memory, minimum, amplitude, period (minutes)
    ("web", {}, "500m", "1Gi", 16, 24, 20),
    ("worker", {"kubernetes.io/arch": "amd64"}, "1", "2Gi", 4, 6, 30),
)


def workload_target(minimum: int, amplitude: int, period: int, now: datetime.datetime) -> int:
    """How many pods a workload wants at `now`: a slow wave, so reservations fill and drain."""
    phase = (now.timestamp() / 60) / period * 2 * math.pi
    return minimum + round(amplitude * (1 + math.sin(phase)) / 2)


@transaction.atomic
def tick_workloads(now=None) -> dict:
    """Pods arrive and leave: each workload moves toward its target; the newest go first."""
    now = now or timezone.now()
    created = deleted = 0
    for app, selector, cpu, memory, minimum, amplitude, period in WORKLOADS:
        target = workload_target(minimum, amplitude, period, now)
        pods = list(Pod.objects.filter(namespace="sim", labels__app=app).order_by("-created_at", "-name"))
        for pod in pods[: max(len(pods) - target, 0)]:
            pod.delete()
            deleted += 1
        for index in range(len(pods), target):
            name = f"{app}-{now:%H%M%S}-{index}"
            spec = {"containers": [{"name": app, "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
            if selector:
                spec["nodeSelector"] = selector
            cpu_m, memory_bytes = pod_requests(spec)
            Pod.objects.get_or_create(namespace="sim", name=name, defaults=dict(
                uid=f"sim-{name}", labels={"app": app}, spec=spec, phase="Pending", created_at=now, synced_at=now,
                cpu_request_millicores=cpu_m, memory_request_bytes=memory_bytes,
                owner_kind="ReplicaSet", owner_name=f"{app}-sim",
            ))
            created += 1
    return {"pods_created": created, "pods_deleted": deleted}


@transaction.atomic
def bind_pending_pods(decisions: dict) -> int:
    """The simulated kube-scheduler: bind the pods the engine says fit existing nodes."""
    nodes = {n.name: n for n in Node.objects.filter(name__in={b["node"] for b in decisions.get("bindings", [])})}
    bound = 0
    for binding in decisions.get("bindings", []):
        namespace, name = binding["pod"].split("/", 1)
        node = nodes.get(binding["node"])
        if node is not None:
            bound += Pod.objects.filter(namespace=namespace, name=name, node_name="").update(
                node=node, node_name=node.name, phase="Running")
    return bound


@transaction.atomic
def tick_ec2(now=None) -> dict:
    """EC2's side of time passing: scheduled reservations start, reservations end, capacity-block
    instances are reclaimed."""
    now = now or timezone.now()
    # A future-dated reservation (or a purchased capacity block) is active from its start, all its
    # units free: nothing could run in it before.
    started = CapacityReservation.objects.filter(
        state=CapacityReservation.State.SCHEDULED, start_date__lte=now,
    ).update(state=CapacityReservation.State.ACTIVE, available_instance_count=F("total_instance_count"))
    reclaimed = 0
    for block in CapacityReservation.objects.filter(
        reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK, end_date__isnull=False,
        state=CapacityReservation.State.ACTIVE,
    ):
        if now >= capacity_block_timing(block.end_date, block.is_ultraserver).termination_at:
            for instance in SimulatedInstance.objects.filter(reservation_id=block.reservation_id, state="running"):
                _stop(instance)
                _lose_node(instance.instance_id)
                reclaimed += 1
    ended = list(CapacityReservation.objects.filter(state=CapacityReservation.State.ACTIVE, end_date__lte=now))
    for reservation in ended:
        # An ended ODCR's instances keep running as plain on-demand; EC2 drops their reservation.
        SimulatedInstance.objects.filter(reservation_id=reservation.reservation_id, state="running").update(
            capacity_type=CapacityType.ON_DEMAND, reservation_id="", reservation_type="")
    CapacityReservation.objects.filter(pk__in=[r.pk for r in ended]).update(state=CapacityReservation.State.EXPIRED)
    return {"reservations_started": started, "instances_reclaimed": reclaimed, "reservations_ended": len(ended)}


def _lose_node(instance_id: str) -> None:
    """An instance EC2 terminated: its pods go back to pending, its Node and NodeClaim go away."""
    for node in Node.objects.filter(provider_id__endswith=f"/{instance_id}").select_related("node_claim"):
        node.pods.update(node=None, node_name="", phase="Pending")
        claim = node.node_claim
        node.delete()
        if claim:
            claim.delete()


def report_reservations(now=None) -> int:
    """What DescribeCapacityReservations would answer for each reservation it lists, written as the EC2 sync
    writes it: its capacity allocations agree with its counts, and it was last seen now. (The rows are the
    simulated EC2: launches change their counts between syncs.) Locked so that no launch lands between
    reading a count and writing the allocations."""
    now = now or timezone.now()
    with transaction.atomic():
        listed = list(CapacityReservation.objects.fleet().select_for_update()
                      .filter(state__in=INVENTORY_STATES).order_by("pk"))
        for reservation in listed:
            reservation.capacity_allocations = used_allocations(reservation.used_instance_count)
            reservation.last_seen = now
        CapacityReservation.objects.fleet().bulk_update(listed, ["capacity_allocations", "last_seen"])
    return len(listed)


def sample_utilization(now=None) -> int:
    """One utilization sample per live reservation, as the EC2 sync writes one per DescribeCapacityReservations."""
    from reservations.models import UtilizationSample

    now = now or timezone.now()
    samples = [
        UtilizationSample(reservation=r, sampled_at=now, used=r.used_instance_count,
                          available=r.available_instance_count, total=r.total_instance_count)
        for r in CapacityReservation.objects.filter(state=CapacityReservation.State.ACTIVE)
    ]
    UtilizationSample.objects.bulk_create(samples)
    return len(samples)


# --- splitting and moving capacity on the rows (EC2's rules, as the EC2 test server has them) ---------

def _relocatable(reservation_id, role, operation) -> CapacityReservation:
    """An active ODCR the fleet owns, locked for the change."""
    reservation = CapacityReservation.objects.fleet().select_for_update().filter(reservation_id=reservation_id).first()
    if reservation is None:
        raise CloudAPIError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{reservation_id}' "
                            "does not exist", operation)
    # Not the fleet's (as the recommendations tell it): no owner account of ours, and seen by accounts of
    # ours other than the placeholder (a fleet of one unnamed account cannot tell, and owns what it sees).
    seen_by = set(reservation.visibilities.values_list("account__account_id", flat=True))
    if reservation.owner_account_id is None and seen_by and UNKNOWN_ACCOUNT_ID not in seen_by:
        raise CloudAPIError("InvalidParameterValue", f"The {role} Capacity Reservation {reservation_id} is not owned by "
                            "your account", operation)
    if reservation.is_capacity_block:
        raise CloudAPIError("UnsupportedOperation", f"Capacity Block {reservation_id} cannot be split or moved", operation)
    if reservation.state != CapacityReservation.State.ACTIVE:
        raise CloudAPIError("IncorrectState", f"The {role} Capacity Reservation {reservation_id} is {reservation.state}, "
                            "not active", operation)
    return reservation


def _check_count(source, count, most, operation) -> None:
    if not 1 <= count <= most:
        raise CloudAPIError("InvalidParameterValue", f"InstanceCount {count} must be between 1 and {most} (the available "
                            f"instances of {source.reservation_id})", operation)


def _resize(reservation, delta) -> None:
    CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(
        total_instance_count=F("total_instance_count") + delta, available_instance_count=F("available_instance_count") + delta)
    reservation.refresh_from_db()
    if reservation.total_instance_count == 0:  # all of it moved and nothing ran in it: EC2 cancels it
        CapacityReservation.objects.fleet().filter(pk=reservation.pk).update(state=CapacityReservation.State.CANCELLED)


def _offering_shape(offering_id: str) -> tuple[str, int, int] | None:
    """(instance type, count, hours) of a simulated offering id (scheduling/simulated_extensions.offering_id_of)."""
    match = re.fullmatch(r"cbo-(.+)-(\d+)x(\d+)h-\d{8}", offering_id or "")
    return (match[1], int(match[2]), int(match[3])) if match else None


def _described(reservation) -> dict:
    return {"CapacityReservationId": reservation.reservation_id, "CapacityReservationArn": reservation.arn,
            "OwnerId": reservation.owner_id, "TotalInstanceCount": reservation.total_instance_count}
