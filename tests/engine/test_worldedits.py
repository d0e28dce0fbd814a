"""What-if edits on their own: each changes a copy of the world as it says, a bad one is named by
its field while the others apply, and the summary reads a plan the way the page shows it."""

from scheduling.engine.simulate import simulate
from scheduling.engine.worldedits import apply_edits, summarize

WORLD = {
    "now": "2026-11-25T12:00:00Z",
    "instanceTypes": [{"name": "m5.large", "cpu": "2", "memory": "8Gi", "pods": 29,
                       "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.096}]}],
    "capacityReservations": [{"CapacityReservationId": "cr-0a1", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
                              "TotalInstanceCount": 1, "AvailableInstanceCount": 1, "State": "active",
                              "InstanceMatchCriteria": "targeted", "OwnerId": "123456789012"}],
    "ec2NodeClasses": [{"metadata": {"name": "default"}, "spec": {"capacityReservationSelectorTerms": [{"id": "cr-0a1"}]}}],
    "nodePools": [{"metadata": {"name": "web"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]}}}}],
    "pods": [{"metadata": {"name": "api", "namespace": "web"},
              "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]},
              "status": {"phase": "Pending"}}],
}


def test_scaling_a_workload_past_the_reservation_spills_to_on_demand():
    before = summarize(simulate(WORLD))
    assert before["byCapacityType"] == {"reserved": 1} and before["paidDollarsPerHour"] == 0
    edited, problems = apply_edits(WORLD, [{"kind": "scale-workload", "like": "web/api", "times": 2}])
    after = summarize(simulate(edited))
    assert problems == [] and after["byCapacityType"] == {"on-demand": 2, "reserved": 1}
    assert after["paidDollarsPerHour"] == 0.192 and len(WORLD["pods"]) == 1  # the original is untouched


def test_adding_a_reservation_takes_the_spill_and_removing_one_brings_it_back():
    edited, problems = apply_edits(WORLD, [{"kind": "scale-workload", "like": "web/api", "times": 2},
                                           {"kind": "add-reservation", "instanceType": "m5.large", "zone": "us-east-1a", "count": 2}])
    assert problems == [] and summarize(simulate(edited))["byCapacityType"] == {"reserved": 3}
    removed, _ = apply_edits(WORLD, [{"kind": "remove-reservation", "id": "cr-0a1"}])
    assert summarize(simulate(removed))["byCapacityType"] == {"on-demand": 1}
    only_reserved, _ = apply_edits(removed, [{"kind": "nodepool-capacity-types", "nodePool": "web", "values": ["reserved"]}])
    assert summarize(simulate(only_reserved))["pending"] == 1


def test_bad_edits_are_named_and_the_others_apply():
    edited, problems = apply_edits(WORLD, [
        {"kind": "grow"}, {"kind": "set-reservation-count", "id": "cr-nope", "count": 1},
        {"kind": "scale-workload", "like": "web/api", "times": 0}, {"kind": "remove-reservation", "id": "cr-0a1"},
        {"kind": "add-reservation", "instanceType": "m5.large", "zone": "us-east-1a", "count": 1, "capacityBlock": True},
    ])
    assert problems == [
        "edits[0].kind: 'grow' is not one of add-reservation, remove-reservation, expire-block, set-reservation-count, "
        "scale-workload, nodepool-capacity-types, nodeclass-selector-terms, at-reservation-start",
        "edits[1].id: no reservation 'cr-nope' in this world",
        "edits[2].times: 0 is not a whole number from 1 to 1000",
        "edits[4].end: a Capacity Block needs its end",
    ]
    assert edited["capacityReservations"] == []



def test_replacing_a_classs_selector_terms_moves_the_pod_off_its_reservation():
    """The selector editor's change, planned: terms that no longer select cr-0a1 send the pod to on-demand."""
    edited, problems = apply_edits(WORLD, [{"kind": "nodeclass-selector-terms", "nodeClass": "default",
                                            "terms": [{"tags": {"team": "nobody"}}]}])
    assert problems == [] and summarize(simulate(edited))["byCapacityType"] == {"on-demand": 1}
    assert WORLD["ec2NodeClasses"][0]["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0a1"}]  # untouched
    _, problems = apply_edits(WORLD, [{"kind": "nodeclass-selector-terms", "nodeClass": "gone", "terms": []},
                                      {"kind": "nodeclass-selector-terms", "nodeClass": "default", "terms": "id"}])
    assert problems == ["edits[0].nodeClass: no EC2NodeClass 'gone' in this world",
                        "edits[1].terms: 'id' is not a list of selector terms (objects)"]
