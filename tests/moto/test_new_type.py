"""A Trainium type the kit has never heard of, from a refresh to a synthesized cluster, with no code change.

EC2's recorded answers (moto) are replayed with one type injected: `trn3.48xlarge`, a name the Neuron driver
uses for Trainium3 (FIELD-NOTES; AWS's EC2 pages do not list it in our sources), with 16 Trainium3 devices of
8 cores. The refresh keeps it because EC2 reports NeuronInfo, not because a list names its family; then it
validates, synthesizes (EFA interfaces from its own data), prices (a clear "no price yet"), passes preflight's
offering check, and counts against the Trn vCPU quota.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit import catalog
from neuronkit.account import preflight
from neuronkit.catalog import pricing, quotas, refresh
from neuronkit.config import parse_environment
from neuronkit.constructs import efa_network_interfaces
from neuronkit.reports import cost, pools
from neuronkit.stacks import build_environment
from tests.conftest import new_app
from tests.templates import resources

NEW = "trn3.48xlarge"
REGION, AZ_ID = "us-east-1", "use1-az6"
CORES, DEVICES, HBM_MIB = 8, 16, 144 * 1024


def _entry(ec2: Any) -> dict[str, Any]:
    """trn1.32xlarge's recorded answer, renamed and given Trainium3 devices."""
    (base,) = ec2.describe_instance_types(InstanceTypes=["trn1.32xlarge"])["InstanceTypes"]
    entry = copy.deepcopy(base)
    entry["InstanceType"] = NEW
    entry["NeuronInfo"] = {
        "NeuronDevices": [
            {
                "Count": DEVICES,
                "Name": "Trainium3",
                "CoreInfo": {"Count": CORES, "Version": 4},
                "MemoryInfo": {"SizeInMiB": HBM_MIB},
            }
        ],
        "TotalNeuronDeviceMemoryInMiB": DEVICES * HBM_MIB,
    }
    return entry


class Injecting:
    """A boto3 session whose EC2 answers carry the new type (and its offering in one AZ ID)."""

    region_name = REGION

    def __init__(self, real: boto3.Session) -> None:
        self.real = real
        self.entry = _entry(real.client("ec2", region_name=REGION))

    def client(self, name: str, region_name: str | None = None, **kw: Any) -> Any:
        client = self.real.client(name, region_name=region_name, **kw)
        if name == "ec2":
            client.meta.events.register("after-call.ec2.DescribeInstanceTypes", self._types)
            client.meta.events.register("after-call.ec2.DescribeInstanceTypeOfferings", self._offerings)
        return client

    def _types(self, parsed: dict[str, Any], **_: Any) -> None:
        if not parsed.get("NextToken") and all(t["InstanceType"] != NEW for t in parsed["InstanceTypes"]):
            parsed["InstanceTypes"].append(copy.deepcopy(self.entry))

    def _offerings(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if not parsed.get("NextToken"):
            parsed["InstanceTypeOfferings"].append(
                {"InstanceType": NEW, "LocationType": "availability-zone-id", "Location": AZ_ID}
            )


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    mp = pytest.MonkeyPatch()
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        mp.setenv(key, value)
    with mock_aws():
        document = refresh.build(Injecting(boto3.Session(region_name=REGION)), regions=(REGION,))
    mp.setattr(catalog, "_raw", lambda: document)
    for cached in (catalog.instance_types, catalog.ami_families):
        cached.cache_clear()
    yield document
    mp.undo()
    for cached in (catalog.instance_types, catalog.ami_families):
        cached.cache_clear()


def environment() -> dict[str, Any]:
    return {
        "name": "next",
        "account": "111111111111",
        "region": REGION,
        "network": {"az_ids": [AZ_ID]},
        "training": [
            {
                "name": "trn3",
                "instance_type": NEW,
                "az_id": AZ_ID,
                "max_size": 2,
                "ami": {"ami_id": "ami-0123456789abcdef0", "root_device_name": "/dev/sda1"},
            }
        ],
    }


def test_the_refresh_keeps_it_because_ec2_says_it_is_trainium(refreshed: dict[str, Any]) -> None:
    entry = refreshed["instance_types"][NEW]
    assert (entry["family"], entry["accelerator"], entry["neuron_devices"], entry["neuron_cores"]) == (
        "trn3",
        "trainium",
        DEVICES,
        DEVICES * CORES,
    )
    assert entry["offerings"] == {REGION: [AZ_ID]}
    assert "trn3" in refreshed["families"]
    it = catalog.get(NEW)
    assert it.is_neuron and it.efa_max_interfaces == catalog.get("trn1.32xlarge").efa_max_interfaces
    # The Neuron DLAMIs that boot "all Neuron instance types" now include the new family, from the data alone.
    assert "trn3" in catalog.ami_families()["neuron-multi-framework-ubuntu-24.04"].supports
    assert catalog.lnc_default("trn3") == 2  # trainium.yaml's Trainium3 facts apply to the family


def test_it_validates_synthesizes_prices_and_preflights(refreshed: dict[str, Any], tmp_path: Any) -> None:
    env = parse_environment(environment(), "environments/next.yaml")
    (cluster,) = env.training
    assert cluster.instance_type == NEW

    app = new_app(tmp_path / "cdk.out")
    build_environment(app, env)
    training = next(s.template for s in app.synth().stacks if s.stack_name == "next-training")
    (lt,) = [
        t
        for t in resources(training, "AWS::EC2::LaunchTemplate").values()
        if t["Properties"]["LaunchTemplateData"].get("InstanceType") == NEW
    ]
    data = lt["Properties"]["LaunchTemplateData"]
    # The kit's EFA layout, computed from the new type's own network cards (every EFA device, one per card).
    expected = efa_network_interfaces(catalog.get(NEW), ["sg-0123456789abcdef0"])
    assert len(data["NetworkInterfaces"]) == len(expected) > catalog.get(NEW).efa_max_interfaces
    assert (
        sum(i.get("InterfaceType") in ("efa", "efa-only") for i in data["NetworkInterfaces"])
        == catalog.get(NEW).efa_max_interfaces
    )
    assert f"EXPECTED_ACCELERATORS='{DEVICES}'" in json.dumps(data["UserData"])

    with pytest.raises(pricing.MissingPriceError) as err:
        cost.price_pools(pools.pools_from_environment(env))
    (line,) = err.value.problems
    assert line.startswith(f"next/trn3 (training): no On-Demand price for {NEW} in {REGION} in neuronkit/catalog/prices.json")
    assert line.endswith("run `neuronkit catalog refresh --prices` (needs pricing:GetProducts) or add the price by hand")

    with mock_aws():
        ec2 = Injecting(boto3.Session(region_name=REGION)).client("ec2", region_name=REGION)
        (check,) = preflight.check_offerings(env, ec2)
    assert check.status == "PASS" and f"{NEW} is offered in {AZ_ID}" in check.detail
    quota = quotas.quota_for_family("trn3")
    assert quota is not None and quota.name == "Running On-Demand Trn instances"
