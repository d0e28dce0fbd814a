"""Every boto3 session karpweb makes (its own credentials, or a fleet account's assumed role) reads
the service models through one botocore data loader for the process (scheduling/adapters/ec2/client.py)."""

import os

import boto3
import pytest

from scheduling.adapters.ec2.client import assumed_role_session, make_session

BOTO3_DATA = os.path.join(os.path.dirname(boto3.__file__), "data")


@pytest.fixture(autouse=True)
def credentials(aws_test_credentials):
    pass


def loader_of(session):
    return session._session.get_component("data_loader")


def test_sessions_share_one_loader_and_each_service_model_is_parsed_once():
    first, second = make_session(), make_session()
    role = assumed_role_session("arn:aws:iam::210987654321:role/karpweb-reader", region="us-east-1",
                                sts_endpoint_url="http://127.0.0.1:9")  # nothing is called until a request
    assert loader_of(first) is loader_of(second) is loader_of(role)
    ec2_model = loader_of(first).load_service_model("ec2", "service-2")
    assert first.client("ec2", region_name="us-east-1").meta.service_model.operation_names
    assert loader_of(second).load_service_model("ec2", "service-2") is ec2_model


def test_the_search_paths_stay_as_they_are_however_many_sessions_are_made():
    paths = loader_of(make_session()).search_paths
    assert paths.count(BOTO3_DATA) == 1  # boto3's own data (its resource models) is found
    for _ in range(20):
        make_session()
    assert loader_of(make_session()).search_paths == paths
    assert "ec2" in make_session().get_available_resources()
