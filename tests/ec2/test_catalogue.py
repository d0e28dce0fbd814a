"""Instance types, offerings and prices."""

from __future__ import annotations

import json

import pytest
from datetime import timedelta

import boto3
from botocore.stub import Stubber

from scheduling.adapters.ec2 import EC2CloudProvider
from scheduling.adapters.ec2.catalogue import bundled_prices, parse_price_list
from scheduling.engine.ec2types import eni_limited_pods
from scheduling.adapters.ec2.interface import ON_DEMAND, RESERVED, SPOT
from tests.ec2.conftest import T0

ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"


def price_item(instance_type: str, usd: str) -> str:
    """One GetProducts PriceList entry, shaped as the Pricing API returns it."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {"instanceType": instance_type, "operatingSystem": "Linux", "tenancy": "Shared"},
                "sku": f"SKU{instance_type}",
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"SKU{instance_type}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"SKU{instance_type}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                            }
                        },
                        "sku": f"SKU{instance_type}",
                    }
                }
            },
        }
    )


def test_instance_types_from_describe_instance_types(world, clock, provider):
    catalogue = provider.catalogue()
    m5 = catalogue.instance_type("m5.large")
    assert (m5.vcpus, m5.memory_mib, m5.architecture) == (2, 8192, "amd64")
    assert m5.max_pods == 3 * (10 - 1) + 2 == 29
    assert m5.gpu_count == 0
    p5 = catalogue.instance_type("p5.48xlarge")
    assert p5.vcpus == 192 and p5.gpu_count == 8 and p5.gpu_manufacturer == "NVIDIA"
    assert p5.gpu_name == "H100"
    assert {it.name for it in catalogue.instance_types} >= {"m5.large", "m5.24xlarge", "c5.large", "p5.48xlarge"}
    assert not any(it.name.startswith("r5") for it in catalogue.instance_types)


def test_offerings_per_zone_with_bundled_prices(world, clock, provider):
    catalogue = provider.catalogue()
    assert catalogue.price_source == "bundled"
    od = [o for o in catalogue.offerings if o.instance_type == "m5.large" and o.capacity_type == ON_DEMAND]
    assert {o.zone for o in od} >= {ZONE_A, ZONE_B}
    assert all(o.price == 0.096 and o.available for o in od)
    assert all(o.zone_id.startswith("use1-az") for o in od)
    assert catalogue.instance_type("m5.large").price_source == "bundled"


def test_spot_prices_latest_per_type_and_zone(world, clock, provider):
    world.set_spot_price("m5.large", ZONE_A, 0.05, T0 - timedelta(hours=2))
    world.set_spot_price("m5.large", ZONE_A, 0.034, T0 - timedelta(minutes=5))
    world.set_spot_price("m5.large", ZONE_B, 0.041, T0 - timedelta(hours=1))
    spot = {
        o.zone: o.price
        for o in provider.catalogue().offerings
        if o.instance_type == "m5.large" and o.capacity_type == SPOT
    }
    assert spot == {ZONE_A: 0.034, ZONE_B: 0.041}


def test_catalogue_is_cached_and_applies_the_ice_cache(world, clock, provider):
    provider.catalogue()
    calls = len(world.calls_of("DescribeInstanceTypes"))
    provider.unavailable.mark("m5.large", ZONE_A, ON_DEMAND, "InsufficientInstanceCapacity")
    offering = next(
        o for o in provider.catalogue().offerings if (o.instance_type, o.zone, o.capacity_type) == ("m5.large", ZONE_A, ON_DEMAND)
    )
    assert not offering.available
    assert len(world.calls_of("DescribeInstanceTypes")) == calls
    clock.advance(minutes=3, seconds=1)
    offering = next(
        o for o in provider.catalogue().offerings if (o.instance_type, o.zone, o.capacity_type) == ("m5.large", ZONE_A, ON_DEMAND)
    )
    assert offering.available
    clock.advance(minutes=5)
    provider.catalogue()
    assert len(world.calls_of("DescribeInstanceTypes")) > calls


def test_reserved_offerings_priced_at_on_demand_over_ten_million(world, clock, provider):
    r = world.add_reservation("m5.large", ZONE_A, 3)
    block = world.add_capacity_block("p5.48xlarge", ZONE_B, 1, start=T0, end=T0 + timedelta(minutes=30))
    reservations = provider.describe_reservations([{"instanceMatchCriteria": "targeted"}])
    offerings = {o.reservation_id: o for o in provider.reserved_offerings(reservations)}
    odcr = offerings[r]
    assert odcr.capacity_type == RESERVED and odcr.zone == ZONE_A
    assert odcr.price == 0.096 / 10_000_000
    assert odcr.reservation_capacity == 3 and odcr.available
    assert not offerings[block].available  # an expiring capacity block takes nothing new
    provider.availability.mark_unavailable(r)
    assert not {o.reservation_id: o for o in provider.reserved_offerings(reservations)}[r].available
    assert not {o.reservation_id: o for o in provider.reserved_offerings(reservations, zones=[ZONE_B])}[r].available


def test_max_pods_formula():
    def info(enis, addresses, cards=None):
        network = {"MaximumNetworkInterfaces": enis, "Ipv4AddressesPerInterface": addresses}
        if cards:
            network.update(NetworkCards=cards, DefaultNetworkCardIndex=0)
        return {"NetworkInfo": network}

    assert eni_limited_pods(info(3, 10)) == 29  # m5.large
    assert eni_limited_pods(info(15, 50)) == 737  # m5.24xlarge
    # p5.48xlarge: 64 ENIs, but the VPC CNI uses only the default card's 2.
    cards = [{"NetworkCardIndex": i, "MaximumNetworkInterfaces": 2} for i in range(32)]
    assert eni_limited_pods(info(64, 50, cards)) == 100
    assert eni_limited_pods(info(0, 0)) == 0  # unknown: the caller uses the kubelet's 110


def test_bundled_price_table():
    prices = bundled_prices()
    assert len(prices) >= 60
    assert prices["m5.large"] == 0.096 and prices["c5.large"] == 0.085 and prices["t3.medium"] == 0.0416
    assert {name.split(".")[0] for name in prices} >= {
        "m5", "m6i", "m7i", "c5", "c6a", "c6i", "c7i", "r5", "r6i", "t3", "g5", "g6", "p4d", "p5", "trn1",
    }


def test_parse_price_list():
    assert parse_price_list([price_item("m5.large", "0.0960000000"), price_item("x.free", "0.0000000000")]) == {
        "m5.large": 0.096
    }


# The Pricing API has no server on these machines (moto does not implement it), so these two tests
# use botocore's Stubber on a real pricing client; everything else talks to the EC2 test server.


def pricing_client_with(stub_setup):
    client = boto3.client("pricing", region_name="us-east-1")
    stubber = Stubber(client)
    stub_setup(stubber)
    stubber.activate()
    return client, stubber


def test_on_demand_prices_from_the_pricing_api(world, clock, make_provider):
    filters = [
        {"Type": "TERM_MATCH", "Field": field, "Value": value}
        for field, value in (
            ("regionCode", "us-east-1"),
            ("tenancy", "Shared"),
            ("productFamily", "Compute Instance"),
            ("preInstalledSw", "NA"),
            ("operatingSystem", "Linux"),
            ("capacitystatus", "Used"),
            ("marketoption", "OnDemand"),
        )
    ]
    request = {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "MaxResults": 100, "Filters": filters}

    def setup(stubber):
        stubber.add_response(
            "get_products",
            {"PriceList": [price_item("m5.large", "0.1010000000")], "NextToken": "page-2", "FormatVersion": "aws_v1"},
            request,
        )
        stubber.add_response(
            "get_products",
            {"PriceList": [price_item("c5.large", "0.0900000000")], "FormatVersion": "aws_v1"},
            {**request, "NextToken": "page-2"},
        )

    pricing, stubber = pricing_client_with(setup)
    provider: EC2CloudProvider = make_provider(config={"pricing_source": "api"}, pricing=pricing)
    catalogue = provider.catalogue()
    stubber.assert_no_pending_responses()
    assert catalogue.instance_type("m5.large").on_demand_price == 0.101
    assert catalogue.instance_type("c5.large").on_demand_price == 0.09
    assert catalogue.instance_type("m5.large").price_source == "pricing-api"
    assert catalogue.instance_type("m5.xlarge").price_source == "bundled"  # not priced by the API
    assert catalogue.price_source == "mixed"


def test_pricing_api_denied_falls_back_to_the_bundled_table(world, clock, make_provider):
    def setup(stubber):
        stubber.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=400)

    pricing, stubber = pricing_client_with(setup)
    provider = make_provider(config={"pricing_source": "api", "extra_retries": 0}, pricing=pricing)
    catalogue = provider.catalogue()
    assert catalogue.price_source == "bundled"
    assert catalogue.instance_type("m5.large").on_demand_price == 0.096
    assert any("AccessDeniedException" in note for note in catalogue.notes)


def test_a_type_no_price_source_knows_is_still_launchable(world, clock, make_provider):
    """c7gn is not in the bundled table and the test server has no Pricing API: its price is the
    priced types' price per vCPU times its vCPUs, it gets offerings, and the catalogue says so."""
    catalogue = make_provider(instance_type_patterns=("m5.*", "c5.*", "c7gn.*")).catalogue()
    c7gn = catalogue.instance_type("c7gn.xlarge")
    assert c7gn.price_source == "estimated" and c7gn.labels["karpenter.k8s.aws/instance-category"] == "c"
    c5_per_vcpu = sorted(it.on_demand_price / it.vcpus for it in catalogue.instance_types if it.name.startswith("c5."))
    assert c7gn.on_demand_price == pytest.approx(c5_per_vcpu[len(c5_per_vcpu) // 2] * 4, rel=0.2)
    c7gn_2x = catalogue.instance_type("c7gn.2xlarge")
    assert c7gn_2x.on_demand_price == pytest.approx(2 * c7gn.on_demand_price)
    assert any(o.instance_type == "c7gn.xlarge" and o.capacity_type == ON_DEMAND for o in catalogue.offerings)
    assert catalogue.price_source == "bundled" and any("estimate" in note for note in catalogue.notes)
    assert catalogue.instance_type("m5.large").price_source == "bundled"


def test_a_narrowed_catalogue_asks_for_the_offerings_of_its_types_only(world, make_provider, ec2_server):
    """The offerings are asked for by the names DescribeInstanceTypes answered (not the patterns:
    not every filter takes a wildcard), and are the same as the whole region's for those types."""
    narrowed = make_provider(instance_type_patterns=("m5.*", "c5.large")).catalogue()
    [asked] = [call.params for call in ec2_server.calls_of("DescribeInstanceTypeOfferings")]
    names = sorted(it.name for it in narrowed.instance_types)
    assert "m5.large" in names and "c5.large" in names and "c5.xlarge" not in names
    assert asked["Filters"] == [{"Name": "instance-type", "Values": names}]
    whole = make_provider(instance_type_patterns=()).catalogue()
    assert sorted((o.instance_type, o.zone, o.capacity_type) for o in narrowed.offerings) == sorted(
        (o.instance_type, o.zone, o.capacity_type) for o in whole.offerings if o.instance_type in names)
