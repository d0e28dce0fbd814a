"""Cluster DNS discovered as Karpenter's AWS provider does (aws/karpenter-provider-aws
``pkg/operator/operator.go`` ``KubeDNSIP``): with no KARPWEB_CLUSTER_DNS, the nodes karpweb launches
get the ClusterIP of the kube-system/kube-dns Service, read from the real API server; the class's
ValidationSucceeded condition says where the address came from; the read is kept for an hour (a
failed one is tried again after a minute) and the setting wins when it names an address."""

from __future__ import annotations

import tomllib

import pytest
from kubernetes.client import ApiClient, Configuration

from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.errors import ClusterError
from scheduling.adapters.kube.resources import SERVICE
from tests.ec2.test_launch_families import al2_bootstrap_args, images, launch, node_class_spec, our_node_config  # noqa: F401
from tests.ec2.test_launch_resolution import account  # noqa: F401 - the account fixture
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.clusters import use_kube_server
from tests.support.ports import free_port

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
KUBE_DNS_IP = "10.96.0.10"  # in the test server's service range (10.96.0.0/24)
FROM_SERVICE = f"cluster DNS {KUBE_DNS_IP} from the kube-system/kube-dns Service's ClusterIP"


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings):
    settings.KARPWEB_CLUSTER_DNS = ""


def _delete_kube_dns(rest) -> None:
    try:
        rest.delete(SERVICE, "kube-dns", "kube-system")
    except Exception:  # not there: nothing to delete
        pass


@pytest.fixture
def kube_dns(rest):
    """The kube-dns Service as EKS creates it, on the shared server for this test only."""
    _delete_kube_dns(rest)
    rest.create(SERVICE, {"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
                          "spec": {"clusterIP": KUBE_DNS_IP, "selector": {"k8s-app": "kube-dns"},
                                   "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                                             {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}},
                namespace="kube-system")
    yield KUBE_DNS_IP
    _delete_kube_dns(rest)


def validation_message(provider, spec) -> str:
    resolved = provider.resolve_node_class("ml", "5b1f0c7e-uid", spec)
    condition = next(c for c in resolved.conditions if c["type"] == "ValidationSucceeded")
    assert condition["status"] == "True", condition
    return condition["message"]


def test_the_adapter_reads_the_kube_dns_cluster_ip(kube_dns, adapter, rest):
    assert adapter.kube_dns_ip() == KUBE_DNS_IP
    _delete_kube_dns(rest)
    assert adapter.kube_dns_ip() == ""  # no Service: no address, not an error


def test_nodes_get_the_discovered_address_on_every_family(kube_dns, adapter, images, make_provider):
    provider = make_provider(kube_dns=adapter.kube_dns_ip)
    assert FROM_SERVICE in validation_message(provider, node_class_spec("AL2023"))
    assert our_node_config(launch(provider, node_class_spec("AL2023")))["spec"]["kubelet"]["config"]["clusterDNS"] == [KUBE_DNS_IP]
    assert al2_bootstrap_args(launch(provider, node_class_spec("AL2")))["--dns-cluster-ip"] == KUBE_DNS_IP
    assert tomllib.loads(launch(provider, node_class_spec("Bottlerocket")))["settings"]["kubernetes"]["cluster-dns-ip"] == KUBE_DNS_IP
    assert f"-DNSClusterIP '{KUBE_DNS_IP}'" in launch(provider, node_class_spec("Windows2022"))
    # The class's own clusterDNS wins, and the status says so.
    spec = node_class_spec("AL2023", kubelet={"clusterDNS": ["10.96.0.53"]})
    assert "cluster DNS 10.96.0.53 from spec.kubelet.clusterDNS" in validation_message(provider, spec)
    assert our_node_config(launch(provider, spec))["spec"]["kubelet"]["config"]["clusterDNS"] == ["10.96.0.53"]


def test_the_setting_wins_over_the_service(kube_dns, adapter, images, make_provider, settings):
    settings.KARPWEB_CLUSTER_DNS = "172.20.0.10"
    provider = make_provider(kube_dns=adapter.kube_dns_ip)
    assert "cluster DNS 172.20.0.10 from the KARPWEB_CLUSTER_DNS setting" in validation_message(provider, node_class_spec("AL2023"))
    assert our_node_config(launch(provider, node_class_spec("AL2023")))["spec"]["kubelet"]["config"]["clusterDNS"] == ["172.20.0.10"]


def test_the_read_is_kept_for_an_hour(kube_dns, adapter, rest, images, make_provider, clock):
    reads = []

    def counted() -> str:
        reads.append(1)
        return adapter.kube_dns_ip()
    provider = make_provider(kube_dns=counted)
    assert FROM_SERVICE in validation_message(provider, node_class_spec("AL2023"))
    _delete_kube_dns(rest)
    clock.advance(minutes=59)
    assert FROM_SERVICE in validation_message(provider, node_class_spec("AL2023"))  # kept
    assert len(reads) == 1
    clock.advance(minutes=2)
    message = validation_message(provider, node_class_spec("AL2023"))
    assert "no kube-system/kube-dns Service with a ClusterIP" in message and "AMI's default" in message
    assert "clusterDNS" not in our_node_config(launch(provider, node_class_spec("AL2023")))["spec"]["kubelet"]["config"]


def test_a_failed_read_leaves_the_amis_default_and_is_retried_after_a_minute(kube_dns, adapter, images, make_provider, clock):
    configuration = Configuration(host=f"https://127.0.0.1:{free_port()}")  # nothing listens there
    configuration.retries = 0
    unreachable = KubeClusterAdapter(ApiClient(configuration))
    with pytest.raises(ClusterError):
        unreachable.kube_dns_ip()
    reaching = {"adapter": unreachable}
    provider = make_provider(kube_dns=lambda: reaching["adapter"].kube_dns_ip())
    message = validation_message(provider, node_class_spec("AL2023"))
    assert "the kube-system/kube-dns Service could not be read" in message and "AMI's default" in message
    reaching["adapter"] = adapter  # the API server answers again
    clock.advance(seconds=30)
    assert "could not be read" in validation_message(provider, node_class_spec("AL2023"))  # not yet retried
    clock.advance(seconds=31)
    assert FROM_SERVICE in validation_message(provider, node_class_spec("AL2023"))


def test_the_worker_reads_it_through_the_clusters_row(kube_dns, kube_server, settings):
    """The loop's provider reads kube-dns through the cluster its row names (not a settings' cluster)."""
    from fleet.scope import cluster_scope
    from scheduling.loop import backends

    settings.KARPWEB_PROVIDER = "aws"
    cluster = use_kube_server(kube_server)
    try:
        with cluster_scope(cluster):
            assert backends.cloud()._kube_dns() == KUBE_DNS_IP
    finally:
        backends.forget()
