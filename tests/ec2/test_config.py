"""Settings and the credential chain: a provider built only from settings reaches the endpoint."""

from __future__ import annotations

from scheduling.adapters.ec2 import EC2CloudProvider, EC2Config

ZONE_A = "us-east-1a"


def test_provider_from_django_settings(world, settings, ec2_endpoint, monkeypatch):
    settings.KARPWEB_AWS_REGION = "us-east-1"
    settings.KARPWEB_EC2_ENDPOINT_URL = ec2_endpoint
    config = EC2Config.from_settings()
    assert (config.region, config.endpoint_url) == ("us-east-1", ec2_endpoint)
    assert config.pricing_source == "bundled"  # no Pricing API behind a custom endpoint
    assert config.resource_groups_endpoint_url == ec2_endpoint
    assert config.retry_mode == "adaptive" and config.max_attempts == 5 and config.reserved_capacity

    r = world.add_reservation("m5.large", ZONE_A, 1, tags={"team": "ml"})
    provider = EC2CloudProvider()  # clients from settings and the environment's credentials
    assert provider.pricing is None
    assert [x["CapacityReservationId"] for x in provider.describe_reservations([{"tags": {"team": "ml"}}])] == [r]


def test_environment_when_settings_leave_it_out(settings, monkeypatch):
    settings.KARPWEB_AWS_REGION = None
    settings.KARPWEB_EC2_ENDPOINT_URL = None
    monkeypatch.setenv("KARPWEB_AWS_REGION", "eu-west-1")
    monkeypatch.setenv("KARPWEB_EC2_RETRY_MODE", "standard")
    monkeypatch.setenv("KARPWEB_FEATURE_RESERVED_CAPACITY", "false")
    settings.KARPWEB_FEATURE_RESERVED_CAPACITY = None
    config = EC2Config.from_settings()
    assert (config.region, config.endpoint_url, config.retry_mode) == ("eu-west-1", None, "standard")
    assert config.pricing_source == "api" and not config.reserved_capacity
