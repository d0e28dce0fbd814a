"""Launch-template garbage collection against the EC2 test server: karpweb's templates for gone
EC2NodeClasses and for reservations no launch can use again are deleted, nothing else is."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reservations.models import CapacityReservation
from scheduling.adapters.ec2.launch import NODECLASS_TAG, TARGET_TAG
from scheduling.adapters.ec2.sync import collect_launch_templates, sync_reservations
from tests.ec2.test_launch import ZONE_A, on_demand, request, reserved
from tests.factories.reservations import EC2NodeClassFactory


def templates(raw_ec2) -> dict[str, dict[str, str]]:
    """Every template on the server: name -> tags."""
    answer = raw_ec2.describe_launch_templates()
    return {t["LaunchTemplateName"]: {tag["Key"]: tag["Value"] for tag in t.get("Tags") or []} for t in answer["LaunchTemplates"]}


def by_target(raw_ec2) -> dict:
    return {(tags.get(NODECLASS_TAG), tags.get(TARGET_TAG)) for tags in templates(raw_ec2).values()}


@pytest.fixture
def three_kinds(world, clock, provider, raw_ec2):
    """Templates for reservations a and b, on-demand for class default, on-demand for class old,
    and one made by another tool."""
    a = world.add_reservation("m5.large", ZONE_A, 4)
    b = world.add_reservation("m5.large", ZONE_A, 4)
    provider.describe_reservations([{"id": a}, {"id": b}])
    assert provider.launch(request("nc-a", reserved(a))).reservation_id == a
    assert provider.launch(request("nc-b", reserved(b))).reservation_id == b
    assert provider.launch(request("nc-od", on_demand())).ok
    assert provider.launch(replace(request("nc-old", on_demand()), nodeclass_name="old")).ok
    raw_ec2.create_launch_template(LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": "ami-12c6146b"})
    return a, b


def test_templates_say_what_they_target(three_kinds, raw_ec2):
    a, b = three_kinds
    assert by_target(raw_ec2) == {("default", a), ("default", b), ("default", None), ("old", None), (None, None)}


def test_only_templates_no_launch_can_use_are_deleted(three_kinds, world, provider, raw_ec2):
    a, b = three_kinds
    deleted = provider.collect_launch_templates({"default"}, {b})
    assert len(deleted) == 2 and all(name.startswith("karpweb/") for name in deleted)
    assert by_target(raw_ec2) == {("default", b), ("default", None), (None, None)}
    assert "someone-elses" in templates(raw_ec2)
    assert provider.collect_launch_templates({"default"}, {b}) == []  # nothing left to do
    # The process forgot the deleted template: a launch into a (live again, say) makes a new one.
    created = len(world.calls_of("CreateLaunchTemplate"))
    assert provider.launch(request("nc-a2", reserved(a))).reservation_id == a
    assert len(world.calls_of("CreateLaunchTemplate")) == created + 1


def test_another_process_with_a_deleted_template_cached_recovers(three_kinds, provider, make_provider):
    a, b = three_kinds
    other = make_provider()
    other.describe_reservations([{"id": b}])
    assert other.launch(request("nc-b2", reserved(b))).ok  # caches b's template id
    provider.collect_launch_templates({"default"}, set())  # b ended for this process
    failed = other.launch(request("nc-b3", reserved(b)))
    assert not failed.ok and failed.error_code.startswith("InvalidLaunchTemplate")
    retried = other.launch(request("nc-b3", reserved(b)))
    assert retried.ok and retried.reservation_id == b


@pytest.mark.django_db
def test_the_models_decide_what_is_live(three_kinds, world, clock, provider, raw_ec2):
    a, b = three_kinds
    EC2NodeClassFactory(name="default", capacity_reservation_selector_terms=[{"id": a}, {"id": b}])
    sync_reservations(provider, clock())
    old = [name for name, tags in templates(raw_ec2).items() if tags.get(NODECLASS_TAG) == "old"]
    assert collect_launch_templates(provider, clock()) == old  # class old is not in the models
    world.expire(a)
    clock.advance(minutes=2)  # past the discovery cache
    sync_reservations(provider, clock())
    assert CapacityReservation.objects.get(reservation_id=a).state == "expired"
    [deleted] = collect_launch_templates(provider, clock())
    assert deleted.startswith("karpweb/default/")
    assert by_target(raw_ec2) == {("default", b), ("default", None), (None, None)}


@pytest.mark.django_db
def test_the_hourly_catalogue_step_collects_only_in_control_mode(three_kinds, provider, raw_ec2, monkeypatch, settings):
    from scheduling.loop import backends, steps

    EC2NodeClassFactory(name="default")
    settings.KARPWEB_PROVIDER = "aws"
    monkeypatch.setattr(backends, "cloud", lambda: provider)  # the provider on the test server
    settings.KARPWEB_MODE = "observe"
    assert "launch_templates_deleted" not in steps.sync_catalogue()
    assert len(templates(raw_ec2)) == 5
    settings.KARPWEB_MODE = "control"
    # Class old is gone; reservations a and b are not in the models (never synced): 3 go.
    assert steps.sync_catalogue()["launch_templates_deleted"] == 3
    assert by_target(raw_ec2) == {("default", None), (None, None)}
