"""The commitment providers over HTTP to the EC2 test server: zonal Reserved Instances
(DescribeReservedInstances) and Savings Plans (savingsplans DescribeSavingsPlans, DescribeSavingsPlanRates),
each cached an hour, and a refusal read as "list prices, because"."""

def test_only_active_zonal_reserved_instances_are_read(world, clock, provider):
    zonal = world.add_reserved_instances("m5.xlarge", "us-east-1b", 2)
    world.add_reserved_instances("m5.large", "us-east-1a", 5, scope="Region")
    world.add_reserved_instances("c5.large", "us-east-1a", 1, days=1)
    clock.advance(days=2)  # the one-day RI has retired
    found = provider.commitments()
    assert [(ri["ReservedInstancesId"], ri["InstanceType"], ri["AvailabilityZone"], ri["InstanceCount"])
            for ri in found["reservedInstances"]] == [(zonal, "m5.xlarge", "us-east-1b", 2)]
    assert found["listPricesBecause"] == []
    assert world.calls_of("DescribeReservedInstances")[-1].params["Filters"] == [
        {"Name": "state", "Values": ["active"]}, {"Name": "scope", "Values": ["Availability Zone"]}]


def test_savings_plan_rates_are_the_linux_shared_tenancy_ones_of_this_region(world, provider):
    plan = world.add_savings_plan({"m5.large": 0.06, "m5.xlarge": 0.12}, commitment=2.5, plan_type="Compute")
    world.add_savings_plan({"m5.large": 0.01}, plan_type="EC2Instance", region="eu-west-1")  # another region's
    [found] = provider.commitments()["savingsPlans"]
    assert found["savingsPlanId"] == plan and found["commitment"] == 2.5
    assert sorted((r["instanceType"], r["rate"]) for r in found["rates"]) == [("m5.large", 0.06), ("m5.xlarge", 0.12)]


def test_commitments_are_read_once_an_hour(world, clock, provider):
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 1)
    world.add_savings_plan({"m5.large": 0.06})
    provider.commitments()
    provider.commitments()
    assert len(world.calls_of("DescribeReservedInstances")) == 1
    assert len(world.calls_of("DescribeSavingsPlans")) == 1
    clock.advance(minutes=61)
    provider.commitments()
    assert len(world.calls_of("DescribeReservedInstances")) == 2
    assert len(world.calls_of("DescribeSavingsPlans")) == 2


def test_no_permission_leaves_list_prices_and_says_why(world, provider):
    world.add_reserved_instances("m5.xlarge", "us-east-1b", 1)
    world.add_savings_plan({"m5.large": 0.06})
    world.refuse_commitments(ri=True, sp=True)
    found = provider.commitments()
    assert found["reservedInstances"] == [] and found["savingsPlans"] == []
    assert found["listPricesBecause"] == [
        "no permission to read Reserved Instances (ec2:DescribeReservedInstances: UnauthorizedOperation)",
        "no permission to read Savings Plans (savingsplans:DescribeSavingsPlans: AccessDeniedException)",
    ]
