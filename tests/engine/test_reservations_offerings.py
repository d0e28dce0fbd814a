from datetime import datetime, timezone

from scheduling.engine.instancetypes import InstanceType, Offering, reserved_offering
from scheduling.engine.labels import CAPACITY_TYPE, RESERVATION_ID, ZONE
from scheduling.engine.overhead import KubeletConfig, allocatable, default_kube_reserved
from scheduling.engine.quantities import ResourceList
from scheduling.engine.requirements import Requirement, Requirements
from scheduling.engine.reservations import CapacityReservation

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
GI = 2**30


def m5_large():
    capacity = ResourceList({"cpu": 2000, "memory": 8 * GI, "pods": 29})
    offerings = (Offering.create("on-demand", "us-east-1a", 0.096), Offering.create("on-demand", "us-east-1b", 0.1),
                 Offering.create("spot", "us-east-1a", 0.035))
    return InstanceType("m5.large", capacity, {}, offerings, capacity)


def test_reserved_offering_price_and_labels():
    cr = CapacityReservation("cr-0abc", "m5.large", "us-east-1a", 3, 4, interruptible=True)
    offering = reserved_offering(m5_large(), cr, NOW)
    assert offering.capacity_type == "reserved" and offering.available and offering.capacity == 3
    assert offering.price == 0.096 / 10_000_000
    assert offering.labels == {
        ZONE: "us-east-1a", CAPACITY_TYPE: "reserved", RESERVATION_ID: "cr-0abc",
        "karpenter.k8s.aws/capacity-reservation-type": "default",
        "karpenter.k8s.aws/capacity-reservation-interruptible": "true",
    }


def test_reserved_offering_unavailable_when_full_inactive_or_past_end():
    it = m5_large()
    full = reserved_offering(it, CapacityReservation("cr-1", "m5.large", "us-east-1a", 0, 4), NOW)
    assert not full.available and full.unavailable_reason == "reservation cr-1 is full (4/4)"
    cancelled = reserved_offering(it, CapacityReservation("cr-2", "m5.large", "us-east-1a", 2, 4, state="cancelled"), NOW)
    assert not cancelled.available and cancelled.unavailable_reason == "reservation cr-2 is cancelled"
    ended = reserved_offering(it, CapacityReservation("cr-3", "m5.large", "us-east-1a", 2, 4, end=NOW), NOW)
    assert not ended.available


def test_consolidation_style_price_ordering_seed_c6a():
    """Seed 002: a c6a.48xlarge and a c6a.large reservation keep their on-demand price order, and
    every reserved offering is cheaper than any paid one."""
    def c6a(name, od):
        return InstanceType(name, ResourceList(), {}, (Offering.create("on-demand", "us-east-1a", od),
                                                        Offering.create("spot", "us-east-1a", od / 3)), ResourceList())
    large, huge = c6a("c6a.large", 0.0765), c6a("c6a.48xlarge", 7.344)
    small_cr = reserved_offering(large, CapacityReservation("cr-s", "c6a.large", "us-east-1a", 1, 1), NOW)
    big_cr = reserved_offering(huge, CapacityReservation("cr-b", "c6a.48xlarge", "us-east-1a", 1, 1), NOW)
    assert small_cr.price == 0.0765 / 1e7 and big_cr.price == 7.344 / 1e7
    assert 0 < small_cr.price < big_cr.price < min(o.price for o in large.offerings)


def test_offering_compatibility_treats_missing_reservation_labels_as_absent():
    od = Offering.create("on-demand", "us-east-1a", 0.1)
    reserved = reserved_offering(m5_large(), CapacityReservation("cr-1", "m5.large", "us-east-1a", 1, 1), NOW)
    wants_reservation = Requirements([Requirement.of(RESERVATION_ID, "In", ["cr-1"])])
    assert reserved.compatible(wants_reservation) and not od.compatible(wants_reservation)
    avoids_it = Requirements([Requirement.of(RESERVATION_ID, "NotIn", ["cr-1"])])
    assert od.compatible(avoids_it) and not reserved.compatible(avoids_it)
    assert not od.compatible(Requirements([Requirement.of(RESERVATION_ID, "Exists")]))
    assert not od.compatible(Requirements([Requirement.of(ZONE, "In", ["us-east-1b"])]))


def test_on_demand_price_prefers_the_reservation_zone():
    it = m5_large()
    assert it.on_demand_price("us-east-1b") == 0.1
    assert it.on_demand_price("us-east-1z") == 0.096
    assert InstanceType("x", ResourceList(), {}, (), ResourceList()).on_demand_price("a") == 0.0


def test_default_overhead_follows_eks():
    reserved = default_kube_reserved(2000, 29)
    assert reserved["cpu"] == 70  # 60m for the first core, 10m for the second
    assert reserved["memory"] == (11 * 29 + 255) * 2**20
    assert default_kube_reserved(96000, 110)["cpu"] == 60 + 10 + 10 + 230
    capacity = ResourceList({"cpu": 2000, "memory": 8 * GI, "pods": 29, "ephemeral-storage": 20 * GI})
    room = allocatable(capacity, KubeletConfig())
    assert room["cpu"] == 1930
    assert room["memory"] == 8 * GI - (11 * 29 + 255) * 2**20 - 100 * 2**20
    assert room["ephemeral-storage"] == 20 * GI - GI - 2 * GI
    assert room["pods"] == 29


def test_kubelet_settings_override_the_defaults():
    capacity = ResourceList({"cpu": 2000, "memory": 8 * GI, "pods": 29})
    kubelet = KubeletConfig(max_pods=10, kube_reserved=ResourceList({"cpu": 500}),
                            eviction_hard={"memory.available": "5%"})
    room = allocatable(capacity, kubelet)
    assert room["cpu"] == 1500 and room["pods"] == 10
    assert room["memory"] == 8 * GI - (11 * 10 + 255) * 2**20 - int(8 * GI * 0.05)
