"""``EC2CloudProvider``: the :class:`~.interface.CloudProvider` on boto3."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from . import catalogue as catalogue_mod
from . import launch as launch_mod
from . import membership as membership_mod
from . import doctor as doctor_mod
from . import nodeclass as nodeclass_mod
from .blockofferings import CapacityBlockOfferings
from .reservedinstances import ReservedInstances
from .savingsplans import SavingsPlans
from .amis import AMIProvider, bottlerocket_version, image_for
from .client import Caller, EC2Config, make_client, make_ec2_client, make_pricing_client, make_resource_groups_client
from .clusterinfo import ClusterInfoProvider, KubeDNSLookup
from .instanceprofiles import InstanceProfileProvider
from .securitygroups import SecurityGroupProvider
from .subnets import SubnetProvider, per_zone
from .userdata import Bootstrap, UserDataError, build
from scheduling.engine.recommendations import ExtensionOffering
from .interface import (
    ON_DEMAND,
    RESERVED,
    Catalogue,
    CloudAPIError,
    InstanceMembership,
    LaunchError,
    LaunchOffering,
    LaunchRequest,
    LaunchResult,
    OfferingInfo,
    TerminateResult,
)
from .reservations import ReservationAvailability, ReservationDiscovery, utcnow
from .status import ReservationStatus, build_status
from .unavailable import UnavailableOfferings

log = logging.getLogger(__name__)

CATALOGUE_TTL = timedelta(minutes=5)
EXTENSION_HOURS = (24, 48, 168)  # the Capacity Block extensions karpweb asks EC2 to price
MAX_TOKEN_ATTEMPTS = 5
MAX_REMEMBERED_INSTANCES = 100_000  # instance -> reservation, for MarkTerminated; oldest forgotten first


class EC2CloudProvider:
    """EC2 through boto3: reservations, catalogue, launches, membership, termination.

    ``clock`` and ``sleep`` are injectable; ``ec2``/``pricing`` clients may be passed in (tests,
    custom sessions), otherwise they are made from :class:`EC2Config` (settings and environment).
    """

    def __init__(
        self,
        config: EC2Config | None = None,
        *,
        ec2: Any = None,
        pricing: Any = None,
        resource_groups: Any = None,
        ssm: Any = None,
        iam: Any = None,
        eks: Any = None,
        ram: Any = None,
        sts: Any = None,
        savingsplans: Any = None,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], None] = time.sleep,
        instance_type_patterns: Sequence[str] = (),
        kube_dns: KubeDNSLookup | None = None,
        cluster: Mapping[str, str] | None = None,
        shared_store: Any = None,
        reservation_fallback: Callable[[str], int | None] | None = None,
        account_id: str = "",
    ) -> None:
        self.config = config or EC2Config.from_settings()
        self.ec2 = ec2 or make_ec2_client(self.config)
        if pricing is None and self.config.pricing_source == "api":
            pricing = make_pricing_client(self.config)
        self.pricing = pricing
        self.resource_groups = resource_groups or make_resource_groups_client(self.config)
        self.clock = clock
        self.call = Caller(self.config, sleep=sleep)
        # Both in `shared_store` when one is given (the loop's: Django's cache), so that no launch
        # depends on which worker ran the account's sync (docs/architecture.md, "Process caches").
        self.availability = ReservationAvailability(clock, shared_store, reservation_fallback)
        self.unavailable = UnavailableOfferings(clock, store=shared_store,
                                                key=f"{account_id or 'own'}:{self.config.region}")
        self.discovery = ReservationDiscovery(
            self.ec2, self.call, self.availability, clock, resource_groups=self.resource_groups
        )
        self.templates = launch_mod.LaunchTemplates(self.ec2, self.call)
        self.block_offerings = CapacityBlockOfferings(self.ec2, self.call, clock)  # block fee estimates
        # Prices that know the account's commitments (zonal RIs, Savings Plans), each read an hour at most.
        self.reserved_instances = ReservedInstances(self.ec2, self.call, clock)
        self._savingsplans = savingsplans
        self.savings_plans = SavingsPlans(self._savingsplans_client, self.call, clock, self.config.region)
        # Launch resolution, one provider per AWS concern, each with its own cache. The clients are
        # made when first needed: a cluster that only observes never calls SSM, IAM or EKS.
        self._ssm, self._iam, self._eks = ssm, iam, eks
        self._ram, self._sts = ram, sts  # the reservation doctor's (made when first needed)
        self._resolvers: dict[str, Any] | None = None
        self._kube_dns = kube_dns  # reads the kube-dns Service's ClusterIP (no KARPWEB_CLUSTER_DNS)
        self._cluster = cluster  # a fleet cluster's name and endpoint (None: the settings')
        self.instance_type_patterns = tuple(instance_type_patterns)
        self._catalogue: Catalogue | None = None
        self._catalogue_lock = threading.Lock()
        self._token_attempts: dict[str, int] = {}
        self._instance_reservations: dict[str, str] = {}

    # --- reservations ----------------------------------------------------------------------
    def describe_reservations(self, selector_terms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self.discovery.list(selector_terms)

    def inventory(self) -> list[dict[str, Any]]:
        """Every reservation usable now or soon (owned or shared), whatever the classes select."""
        return self.discovery.inventory()

    def reservations_by_id(self, reservation_ids: Sequence[str]) -> list[dict[str, Any]]:
        """These reservations in any state; ids EC2 no longer knows are left out."""
        return self.discovery.by_ids(reservation_ids)

    def available_instance_count(self, reservation_id: str) -> int:
        return self.availability.get(reservation_id)

    def capacity_reservation_usage(self, reservation_id: str) -> dict[str, int]:
        """GetCapacityReservationUsage: units used per account (only the owner may ask)."""
        return self.discovery.usage(reservation_id)

    # --- commitments: what the account already pays for -----------------------------------------
    def _savingsplans_client(self) -> Any:
        if self._savingsplans is None:
            self._savingsplans = make_client("savingsplans", self.config, self.config.savingsplans_endpoint_url)
        return self._savingsplans

    def commitments(self) -> dict[str, Any]:
        """WORLD.json `commitments` (scheduling/engine/commitments.py): the active zonal Reserved
        Instances, the active EC2 Savings Plans with their rates here, and what could not be read (no
        permission: list prices for that part, said on the overview)."""
        ris, plans = self.reserved_instances.zonal(), self.savings_plans.with_rates()
        return {"reservedInstances": ris.items, "savingsPlans": plans.items,
                "listPricesBecause": [reading.refused for reading in (ris, plans) if reading.refused]}

    # --- the reservation doctor ------------------------------------------------------------------
    def pending_share_invitations(self) -> list[dict[str, Any]]:
        """AWS RAM invitations still pending that would share capacity reservations with this account."""
        if self._ram is None:
            self._ram = make_client("ram", self.config, self.config.ram_endpoint_url)
        return doctor_mod.pending_invitations(self._ram, self.call)

    def simulate_permissions(self, principal_arn: str, actions: Sequence[str]) -> dict[str, str]:
        """iam:SimulatePrincipalPolicy for a role: action -> allowed | implicitDeny | explicitDeny."""
        if self._iam is None:
            self._iam = make_client("iam", self.config, self.config.iam_endpoint_url)
        return doctor_mod.simulate(self._iam, self.call, principal_arn, list(actions))

    def own_role_arn(self) -> str:
        """The role this provider's credentials work as (sts:GetCallerIdentity)."""
        if self._sts is None:
            self._sts = make_client("sts", self.config, self.config.sts_endpoint_url)
        return doctor_mod.caller_role(self._sts, self.call)

    def nodeclass_status(self, name: str, selector_terms: Sequence[Mapping[str, Any]] | None) -> ReservationStatus:
        """Status entries and ``CapacityReservationsReady`` for one EC2NodeClass."""
        return build_status(
            name, selector_terms, self.describe_reservations, self.clock(), enabled=self.config.reserved_capacity
        )

    def cluster_launch_templates(self) -> list[launch_mod.TemplatePreference]:
        """Karpenter's launch templates (tag karpenter.k8s.aws/cluster) and their reservation preference."""
        return launch_mod.cluster_template_preferences(self.ec2, self.call)

    # --- catalogue ---------------------------------------------------------------------------
    def catalogue(self, refresh: bool = False) -> Catalogue:
        """Instance types and on-demand/spot offerings; fetched at most every five minutes, with
        availability from the unavailable-offerings cache applied on every call."""
        with self._catalogue_lock:
            now = self.clock()
            if refresh or self._catalogue is None or self._catalogue.fetched_at + CATALOGUE_TTL <= now:
                self._catalogue = catalogue_mod.fetch_catalogue(
                    self.ec2,
                    self.pricing,
                    self.call,
                    region=self.config.region,
                    pricing_source=self.config.pricing_source,
                    now=now,
                    unavailable=self.unavailable.snapshot(),
                    instance_type_patterns=self.instance_type_patterns,
                )
            cached = self._catalogue
        marks = self.unavailable.snapshot()
        offerings = [
            replace(o, available=not marks.is_unavailable(o.instance_type, o.zone, o.capacity_type))
            for o in cached.offerings
        ]
        return Catalogue(cached.instance_types, offerings, cached.fetched_at, cached.price_source, list(cached.notes))

    def reserved_offerings(
        self, reservations: Sequence[Mapping[str, Any]], zones: Iterable[str] | None = None
    ) -> list[OfferingInfo]:
        return catalogue_mod.reserved_offerings(
            reservations, self.catalogue(), self.availability.get, self.clock(), zones
        )

    # --- acting on reservations (recommendations applied by an operator) -------------------------
    def modify_reservation(self, reservation_id: str, *, instance_count: int | None = None,
                           end_date: datetime | None = None) -> None:
        params: dict[str, Any] = {"CapacityReservationId": reservation_id}
        if instance_count is not None:
            params["InstanceCount"] = instance_count
        if end_date is not None:
            params.update(EndDate=end_date, EndDateType="limited")
        self.call(self.ec2, "modify_capacity_reservation", **params)

    def cancel_reservation(self, reservation_id: str) -> None:
        self.call(self.ec2, "cancel_capacity_reservation", CapacityReservationId=reservation_id)

    def split_reservation(self, reservation_id: str, instance_count: int, *, client_token: str) -> dict[str, Any]:
        """Splits idle units off into a new reservation (CreateCapacityReservationBySplitting); returns the new one.
        The client token makes a retried call (the Caller retries throttling) split once."""
        answer = self.call(self.ec2, "create_capacity_reservation_by_splitting", SourceCapacityReservationId=reservation_id,
                           InstanceCount=instance_count, ClientToken=client_token)
        self.discovery.invalidate()
        return answer.get("DestinationCapacityReservation") or {}

    def move_reservation_instances(self, reservation_id: str, destination_id: str, instance_count: int, *,
                                   client_token: str) -> dict[str, Any]:
        """Moves idle units to a reservation of the same shape (MoveCapacityReservationInstances)."""
        answer = self.call(self.ec2, "move_capacity_reservation_instances", SourceCapacityReservationId=reservation_id,
                           DestinationCapacityReservationId=destination_id, InstanceCount=instance_count,
                           ClientToken=client_token)
        self.discovery.invalidate()
        return answer

    def lend_reservation_units(self, reservation_id: str, instance_count: int, *, client_token: str) -> dict[str, Any]:
        """Lends idle units as an interruptible reservation (CreateInterruptibleCapacityReservationAllocation); the
        client token makes a retried call lend once."""
        answer = self.call(self.ec2, "create_interruptible_capacity_reservation_allocation", CapacityReservationId=reservation_id,
                           InstanceCount=instance_count, ClientToken=client_token)
        self.discovery.invalidate()
        return answer

    def reclaim_lent_units(self, reservation_id: str, target_count: int) -> dict[str, Any]:
        """Shrinks the interruptible allocation to `target_count` (UpdateInterruptibleCapacityReservationAllocation):
        EC2 warns the borrowers beyond it and gives their units back two minutes later. An absolute target: a retry
        asks for the same thing."""
        answer = self.call(self.ec2, "update_interruptible_capacity_reservation_allocation", CapacityReservationId=reservation_id,
                           TargetInstanceCount=target_count)
        self.discovery.invalidate()
        # Units free at once are back: launches into them must not wait for the next sync's count.
        self.availability.sync({r["CapacityReservationId"]: int(r.get("AvailableInstanceCount") or 0)
                                for r in self.discovery.by_ids([reservation_id]) if r.get("State") == "active"})
        return answer

    def capacity_block_extension_offerings(self, reservation_id: str) -> list[ExtensionOffering]:
        """What EC2 sells to extend a Capacity Block by a day, two days or a week (the duration is required)."""
        offers = []
        for hours in EXTENSION_HOURS:
            answer = self.call(self.ec2, "describe_capacity_block_extension_offerings", CapacityReservationId=reservation_id,
                               CapacityBlockExtensionDurationHours=hours)
            offers += answer.get("CapacityBlockExtensionOfferings") or []
        return [ExtensionOffering(o["CapacityBlockExtensionOfferingId"], int(o.get("CapacityBlockExtensionDurationHours") or 0),
                                  float(o.get("UpfrontFee") or 0), o.get("CurrencyCode") or "USD") for o in offers]

    def capacity_block_fee_estimate(self, instance_type: str, instance_count: int, hours: int) -> float | None:
        """The lowest upfront fee EC2 quotes today for a block of this shape (DescribeCapacityBlockOfferings)."""
        return self.block_offerings.lowest_fee(instance_type, instance_count, hours)

    def capacity_block_offerings(self, instance_type: str, instance_count: int, hours: int, *, ultraserver_type: str = "",
                                 ultraserver_count: int = 0, fresh: bool = False) -> list[dict]:
        """DescribeCapacityBlockOfferings' items for this shape (cached an hour, as the fee estimate; `fresh`: asked
        now); an UltraServer shape is asked for by UltraserverType and UltraserverCount."""
        return self.block_offerings.offerings(instance_type, instance_count, hours, ultraserver_type=ultraserver_type,
                                              ultraserver_count=ultraserver_count, fresh=fresh)

    def purchase_capacity_block(self, offering_id: str, *, platform: str, tags: Mapping[str, str]) -> dict[str, Any]:
        """PurchaseCapacityBlock: the new block's reservation as EC2 answers it (payment-pending, then scheduled).
        EC2 takes no ClientToken here: the caller makes it idempotent (reservations/purchases.py finds a block
        bought before by its tags, `reservations_tagged`, before it buys)."""
        answer = self.call(self.ec2, "purchase_capacity_block", CapacityBlockOfferingId=offering_id,
                           InstancePlatform=platform, TagSpecifications=[{
                               "ResourceType": "capacity-reservation",
                               "Tags": [{"Key": key, "Value": value} for key, value in tags.items()]}])
        self.block_offerings.forget()
        self.discovery.invalidate()
        return answer.get("CapacityReservation") or {}

    def reservations_tagged(self, key: str, value: str) -> list[dict[str, Any]]:
        """The account's reservations, in any state, with this tag (DescribeCapacityReservations, one filter)."""
        found, token = [], None
        while True:
            params: dict[str, Any] = {"Filters": [{"Name": f"tag:{key}", "Values": [value]}]}
            if token:
                params["NextToken"] = token
            answer = self.call(self.ec2, "describe_capacity_reservations", **params)
            found += answer.get("CapacityReservations") or []
            token = answer.get("NextToken")
            if not token:
                return found

    def purchase_capacity_block_extension(self, offering_id: str, reservation_id: str) -> dict[str, Any]:
        answer = self.call(self.ec2, "purchase_capacity_block_extension", CapacityBlockExtensionOfferingId=offering_id,
                           CapacityReservationId=reservation_id)
        return (answer.get("CapacityBlockExtensions") or [{}])[0]

    # --- launch resolution ----------------------------------------------------------------------
    def _resolution_providers(self) -> dict[str, Any]:
        if self._resolvers is None:
            ssm = self._ssm or make_client("ssm", self.config, self.config.ssm_endpoint_url)
            iam = self._iam or make_client("iam", self.config, self.config.iam_endpoint_url)
            eks = self._eks or make_client("eks", self.config, self.config.eks_endpoint_url)
            self._resolvers = {
                "amis": AMIProvider(self.ec2, ssm, self.call, self.clock),
                "subnets": SubnetProvider(self.ec2, self.call, self.clock),
                "security_groups": SecurityGroupProvider(self.ec2, self.call, self.clock),
                "profiles": InstanceProfileProvider(iam, self.call, self.clock, self.config.region),
                "cluster": ClusterInfoProvider(eks, self.call, self.clock, self._kube_dns, self._cluster),
            }
        return self._resolvers

    def resolve_node_class(
        self, name: str, uid: str, spec: Mapping[str, Any], create_profile: bool = True, status_profile: str = ""
    ) -> nodeclass_mod.NodeClassResolution:
        """The EC2NodeClass's AMIs, subnets, security groups, instance profile and conditions;
        `status_profile` is the class's status.instanceProfile (kept while it holds spec.role)."""
        return nodeclass_mod.resolve(name, uid, spec, create_profile=create_profile, status_profile=status_profile,
                                     **self._resolution_providers())

    def _complete(self, request: LaunchRequest) -> LaunchRequest:
        """Fill a request that names its EC2NodeClass with what Karpenter would launch with; raises
        CloudAPIError(NodeClassNotReady) when the class cannot launch, saying why."""
        node_class = request.node_class
        assert node_class is not None
        resolved = self.resolve_node_class(request.nodeclass_name, node_class.uid, node_class.spec,
                                           status_profile=node_class.status_profile)
        if not resolved.ready or resolved.cluster is None:
            raise CloudAPIError("NodeClassNotReady", f"EC2NodeClass {request.nodeclass_name}: {resolved.why_not_ready}")
        subnets = per_zone(resolved.subnets)
        images, offerings = {}, []
        for offering in request.offerings:
            arch, variant = node_class.shapes.get(offering.instance_type, ("amd64", "standard"))
            image = image_for(resolved.images, arch, variant)
            if image is not None and (offering.subnet_id or offering.zone in subnets):
                images[offering.instance_type] = image.id
                offerings.append(offering)
        if not offerings:
            wanted = ", ".join(sorted({f"{o.instance_type} in {o.zone}" for o in request.offerings}))
            raise CloudAPIError("NodeClassNotReady", f"EC2NodeClass {request.nodeclass_name} has no image in "
                                f"status.amis or no subnet in status.subnets for {wanted}")
        spec, cluster = node_class.spec, resolved.cluster
        bootstrap = Bootstrap(cluster.name, cluster.endpoint, cluster.ca_bundle, cluster.service_cidr,
                              labels=node_class.labels, taints=node_class.taints, kubelet=spec.get("kubelet") or {},
                              dns_ip=cluster.dns_ip, instance_store_raid0=spec.get("instanceStorePolicy") == "RAID0",
                              bottlerocket_version=bottlerocket_version(spec.get("amiSelectorTerms") or [], resolved.images))
        try:  # one user data per planned maxPods (upstream: one launch template per distinct maxPods)
            by_pods = {pods: build(resolved.family, replace(bootstrap, max_pods=pods), spec.get("userData"))
                       for pods in {node_class.max_pods.get(o.instance_type) for o in offerings}}
        except UserDataError as exc:
            raise CloudAPIError("NodeClassNotReady", f"EC2NodeClass {request.nodeclass_name}: spec.userData: {exc}") from None
        user_data_by_type = {o.instance_type: by_pods[node_class.max_pods.get(o.instance_type)] for o in offerings}
        user_data = user_data_by_type[offerings[0].instance_type]
        tags = {**(spec.get("tags") or {}), **request.tags, f"kubernetes.io/cluster/{cluster.name}": "owned",
                "eks:eks-cluster-name": cluster.name, "karpenter.sh/nodepool": node_class.nodepool,
                "karpenter.k8s.aws/ec2nodeclass": request.nodeclass_name}
        return replace(
            request, offerings=offerings, image_ids=images, image_id=next(iter(images.values())), subnet_ids=subnets,
            security_group_ids=[g.id for g in resolved.security_groups], instance_profile=resolved.instance_profile,
            user_data=user_data, user_data_by_type=user_data_by_type, tags=tags, context=request.context or spec.get("context"),
            block_device_mappings=launch_mod.block_device_mappings(spec.get("blockDeviceMappings"), resolved.family),
            metadata_options=launch_mod.metadata_options(spec.get("metadataOptions")),
            detailed_monitoring=bool(spec.get("detailedMonitoring")),
            associate_public_ip=spec.get("associatePublicIPAddress"),
        )

    # --- launch ------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> LaunchResult:
        if request.node_class is not None:
            try:
                request = self._complete(request)
            except CloudAPIError as exc:
                return LaunchResult(error_code=exc.code, error_message=exc.message, errors=[LaunchError(exc.code, exc.message)])
        offerings = request.offerings
        if not self.config.reserved_capacity:
            offerings = [o for o in offerings if o.capacity_type != RESERVED]
        launch_plan = launch_mod.plan(offerings, self.availability.get, self.unavailable.snapshot().is_unavailable)
        if launch_plan is None:
            return LaunchResult(
                error_code="InsufficientCapacity",
                error_message="all requested instance types were unavailable during launch",
            )
        try:
            template_ids = self._templates_for(request, launch_plan)
        except CloudAPIError as exc:
            return LaunchResult(error_code=exc.code, error_message=exc.message, errors=[LaunchError(exc.code, exc.message)])
        params = launch_mod.fleet_request(request, launch_plan, template_ids)
        reservation_of_template = {tid: key[0] for key, tid in template_ids.items()}

        attempt = self._token_attempts.get(request.nodeclaim_name, 0)
        for _ in range(MAX_TOKEN_ATTEMPTS):
            try:
                answer = self.call(
                    self.ec2, "create_fleet", **params, ClientToken=launch_mod.client_token(request.nodeclaim_name, attempt)
                )
            except CloudAPIError as exc:
                if exc.code == "IdempotentParameterMismatch":
                    # The token was used by an earlier launch of this NodeClaim with other
                    # offerings. If that launch started an instance, it is the answer.
                    existing = self.describe_instances(tags={launch_mod.NODECLAIM_TAG: request.nodeclaim_name})
                    if existing:
                        return self._result_from_instance(existing[0])
                    attempt += 1
                    self._set_attempt(request.nodeclaim_name, attempt)
                    continue
                if exc.code.startswith("InvalidLaunchTemplate"):
                    self.templates.forget()  # deleted behind this process's back: the next launch recreates them
                return LaunchResult(
                    error_code=exc.code,
                    error_message=exc.message,
                    errors=[LaunchError(exc.code, exc.message, capacity_type=launch_plan.capacity_type)],
                )
            result = self._fleet_result(answer, launch_plan, reservation_of_template, request.open_reservations)
            if (result.error_code or "").startswith("InvalidLaunchTemplate"):
                self.templates.forget()  # deleted behind this process's back: the next launch recreates them
            if not result.ok:
                # The next launch of this NodeClaim must not replay this failed fleet. (After a
                # success the token stays: a retry then returns the same instance.)
                self._set_attempt(request.nodeclaim_name, attempt + 1)
            return result
        return LaunchResult(
            error_code="IdempotentParameterMismatch",
            error_message=f"no usable client token after {MAX_TOKEN_ATTEMPTS} attempts",
        )

    def collect_launch_templates(self, live_nodeclasses: set[str], live_targets: set[str]) -> list[str]:
        """Delete the launch templates no launch can use again (see LaunchTemplates.collect_garbage)."""
        return self.templates.collect_garbage(live_nodeclasses, live_targets)

    def _templates_for(
        self, request: LaunchRequest, launch_plan: launch_mod.LaunchPlan
    ) -> dict[launch_mod.TemplateKey, str]:
        ids: dict[launch_mod.TemplateKey, str] = {}
        for o in launch_plan.offerings:
            key = launch_mod.template_key(launch_plan, request, o)
            if key in ids:
                continue
            reserved = launch_plan.capacity_type == RESERVED
            data = launch_mod.launch_template_data(
                request, o if reserved else None, launch_plan.capacity_type, self.config.reserved_capacity, key[1], key[2]
            )
            ids[key] = self.templates.ensure(request.nodeclass_name, data)
        return ids

    def _fleet_result(
        self,
        answer: Mapping[str, Any],
        launch_plan: launch_mod.LaunchPlan,
        reservation_of_template: Mapping[str, str | None],
        open_reservations: bool = False,
    ) -> LaunchResult:
        capacity_type = launch_plan.capacity_type
        by_pool: dict[tuple[str | None, str, str], LaunchOffering] = {
            (o.reservation_id if capacity_type == RESERVED else None, o.instance_type, o.zone): o
            for o in launch_plan.offerings
        }

        def offering_for(item: Mapping[str, Any]) -> tuple[str | None, str, str]:
            lto = item.get("LaunchTemplateAndOverrides") or {}
            template_id = (lto.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateId")
            override = lto.get("Overrides") or {}
            return reservation_of_template.get(template_id), override.get("InstanceType", ""), override.get("AvailabilityZone", "")

        result = LaunchResult(fleet_id=answer.get("FleetId"))
        for err in answer.get("Errors", []) or []:
            reservation_id, instance_type, zone = offering_for(err)
            code = err.get("ErrorCode") or "UnknownError"
            result.errors.append(
                LaunchError(code, err.get("ErrorMessage") or "", instance_type, zone, capacity_type, reservation_id)
            )
            if code not in launch_mod.UNFULFILLABLE_CAPACITY_CODES:
                continue  # e.g. RequestLimitExceeded: recorded, never marks capacity unavailable
            if capacity_type == RESERVED:
                if reservation_id and reservation_id not in result.reservations_marked_unavailable:
                    self.availability.mark_unavailable(reservation_id)
                    result.reservations_marked_unavailable.append(reservation_id)
            elif instance_type and zone:
                self.unavailable.mark(instance_type, zone, capacity_type, code, answer.get("FleetId"))
                result.offerings_marked_unavailable.append((instance_type, zone, capacity_type))

        instances = [i for i in answer.get("Instances", []) or [] if i.get("InstanceIds")]
        if not instances:
            codes = sorted({e.code for e in result.errors})
            result.error_code = codes[0] if len(codes) == 1 else "UnfulfillableCapacity"
            result.error_message = "; ".join(f"{e.code}: {e.message}" for e in result.errors) or "fleet launched no instance"
            return result
        item = instances[0]
        reservation_id, instance_type, zone = offering_for(item)
        offering = by_pool.get((reservation_id, instance_type, zone))
        result.instance_id = item["InstanceIds"][0]
        result.instance_type = item.get("InstanceType") or instance_type
        result.zone = zone
        result.capacity_type = capacity_type
        if capacity_type == RESERVED and reservation_id:
            if offering is not None and offering.reservation_group_arn:
                # The launch targeted the group: EC2 picked the member, DescribeInstances says which.
                reservation_id = self._reservation_of(result.instance_id) or reservation_id
            result.reservation_id = reservation_id
            result.reservation_type = offering.reservation_type if offering else None
            result.interruptible = bool(offering and offering.interruptible)
            if result.instance_id not in self._instance_reservations:  # a replayed fleet counts once
                self.availability.mark_launched(reservation_id)
                self._remember(result.instance_id, reservation_id)
        elif capacity_type == ON_DEMAND and open_reservations:
            result.open_reservation_id = self._open_reservation_of(result.instance_id)
        return result

    def _describe_one(self, instance_id: str) -> InstanceMembership | None:
        try:
            found = membership_mod.describe(self.ec2, self.call, [instance_id], reserved_capacity=self.config.reserved_capacity)
        except CloudAPIError as exc:
            log.warning("DescribeInstances for %s after its launch failed (%s)", instance_id, exc.code)
            return None
        return found[0] if found else None

    def _reservation_of(self, instance_id: str) -> str | None:
        found = self._describe_one(instance_id)
        return found.reservation_id if found else None

    def _open_reservation_of(self, instance_id: str) -> str | None:
        found = self._describe_one(instance_id)
        return found.open_reservation_id if found else None

    def group_members(self, group_arn: str) -> list[str]:
        """The reservation ids in a Capacity Reservation group (ListGroupResources, every page);
        ``[]`` when the group does not exist."""
        return self.discovery.group_members(group_arn)

    def _result_from_instance(self, instance: InstanceMembership) -> LaunchResult:
        return LaunchResult(
            instance_id=instance.instance_id,
            instance_type=instance.instance_type,
            zone=instance.zone,
            capacity_type=instance.capacity_type,
            reservation_id=instance.reservation_id,
            reservation_type=instance.reservation_type,
            interruptible=instance.interruptible,
        )

    # --- membership and termination ------------------------------------------------------------
    def describe_instances(
        self, instance_ids: Sequence[str] | None = None, tags: Mapping[str, str] | None = None
    ) -> list[InstanceMembership]:
        found = membership_mod.describe(
            self.ec2, self.call, instance_ids, tags, reserved_capacity=self.config.reserved_capacity
        )
        for m in found:
            if m.reservation_id:
                self._remember(m.instance_id, m.reservation_id)
        return found

    def _set_attempt(self, nodeclaim_name: str, attempt: int) -> None:
        self._token_attempts[nodeclaim_name] = attempt
        while len(self._token_attempts) > MAX_REMEMBERED_INSTANCES:
            del self._token_attempts[next(iter(self._token_attempts))]

    def _remember(self, instance_id: str, reservation_id: str) -> None:
        self._instance_reservations[instance_id] = reservation_id
        while len(self._instance_reservations) > MAX_REMEMBERED_INSTANCES:
            del self._instance_reservations[next(iter(self._instance_reservations))]

    # Upstream's three DescribeInstanceStatus queries (aws pkg/providers/instancestatus).
    STATUS_FILTERS = (
        [{"Name": "instance-status.status", "Values": ["impaired"]}],
        [{"Name": "system-status.status", "Values": ["impaired"]}],
        [{"Name": "event.code", "Values": ["instance-reboot", "system-reboot", "system-maintenance",
                                           "instance-retirement", "instance-stop"]}],
    )

    def instance_statuses(self) -> list[dict]:
        """DescribeInstanceStatus answers for instances with an impaired instance or system check
        or a scheduled event, once each (scheduling.engine.interruptions.status_check_failures
        reads them)."""
        seen: dict[str, dict] = {}
        for filters in self.STATUS_FILTERS:
            token = None
            while True:
                answer = self.call(self.ec2, "describe_instance_status", Filters=filters, IncludeAllInstances=False,
                                   **({"NextToken": token} if token else {}))
                for status in answer.get("InstanceStatuses") or []:
                    seen.setdefault(status.get("InstanceId", ""), status)
                token = answer.get("NextToken")
                if not token:
                    break
        return list(seen.values())

    def terminate(self, instance_ids: Sequence[str]) -> TerminateResult:
        """TerminateInstances; ids EC2 no longer knows are reported as not found and, when they sat
        in a reservation, give its unit back to the in-memory count (upstream MarkTerminated)."""
        result = TerminateResult()
        ids = list(dict.fromkeys(instance_ids))
        for start in range(0, len(ids), membership_mod.ID_CHUNK):
            chunk = ids[start : start + membership_mod.ID_CHUNK]
            try:
                answer = self.call(self.ec2, "terminate_instances", InstanceIds=chunk)
            except CloudAPIError as exc:
                if exc.code != "InvalidInstanceID.NotFound":
                    result.errors.append(LaunchError(exc.code, exc.message))
                    continue
                live = {m.instance_id for m in membership_mod.describe(self.ec2, self.call, chunk)}
                gone = [i for i in chunk if i not in live]
                result.not_found.extend(gone)
                for instance_id in gone:
                    reservation_id = self._instance_reservations.pop(instance_id, None)
                    if reservation_id:
                        self.availability.mark_terminated(reservation_id)
                if not live:
                    continue
                try:
                    answer = self.call(self.ec2, "terminate_instances", InstanceIds=sorted(live))
                except CloudAPIError as retry_exc:
                    result.errors.append(LaunchError(retry_exc.code, retry_exc.message))
                    continue
            result.terminating.extend(i["InstanceId"] for i in answer.get("TerminatingInstances", []))
        return result
