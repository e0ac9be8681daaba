"""Deploy the AWS Batch stacks into moto's CloudFormation and read the Batch resources back with boto3.

The environment is the one of tests/unit/test_batch.py: a trn1.32xlarge batch cluster (EFA interfaces in
the launch template, so no security groups on the compute environment) with a p5.48xlarge batch GPU pool,
a trn1.2xlarge batch cluster with one node kept (min_size 1) and a plain Auto Scaling cluster.

moto 5.2.5 and Batch: two gaps are worked around in ``neuronkit.rehearsal.moto_workarounds``
(a compute environment without security groups, a ``multinode`` job definition from CloudFormation).
moto keeps no ``jobStateTimeLimitActions`` on queues and no placement group or launch template on the
instances it starts for a compute environment: those are checked in tests/unit/test_batch.py. No job is
submitted: moto runs jobs in Docker.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit import catalog
from neuronkit.config import parse_environment
from neuronkit.constructs import compliance
from neuronkit.rehearsal import moto_workarounds
from neuronkit.rehearsal.assembly import pinned_image_ids
from neuronkit.rehearsal.moto_workarounds import seed_pinned_images, seed_public_parameter
from neuronkit.stacks import build_environment
from tests.conftest import pinned_app
from tests.moto.test_deploy import publish_assets
from tests.unit.test_batch import BASE, CUDA_IMAGE, FILE, IMAGE

# Types moto skips warn on every read of the stack; tests/moto/test_deploy.py lists and covers them.
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")
ENV = parse_environment(copy.deepcopy(BASE), FILE)
STACKS = [f"{ENV.name}-{part}" for part in ("network", "storage", "training")]


class Deployed:
    def __init__(self, session: boto3.Session, templates: dict[str, dict[str, Any]]):
        self.session = session
        self.templates = templates
        self.batch = session.client("batch")


@pytest.fixture(scope="module")
def deployed(aws_credentials: None) -> Iterator[Deployed]:
    app, _ = pinned_app(lambda a: build_environment(a, ENV))  # the AMI lookups, as the CLI does them
    compliance.apply(app)
    assembly = app.synth()
    templates = {s.stack_name: s.template for s in assembly.stacks}
    moto_workarounds.apply()  # the Batch workarounds among them
    mp = pytest.MonkeyPatch()
    mp.setenv("MOTO_ACCOUNT_ID", ENV.account)
    with mock_aws():
        session = boto3.Session(region_name=ENV.region)
        image = session.client("ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        for template in templates.values():
            seed_pinned_images(ENV.account, ENV.region, pinned_image_ids(template), "/dev/xvda")
            for param in template.get("Parameters", {}).values():
                if param["Type"].startswith("AWS::SSM::Parameter::Value") and param["Default"].startswith("/aws/"):
                    seed_public_parameter(ENV.account, ENV.region, param["Default"], image)
        session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        cfn = session.client("cloudformation")
        for name in STACKS:
            publish_assets(session, Path(assembly.directory), name)  # Lambda code (the network's custom resources)
            cfn.create_stack(
                StackName=name, TemplateBody=json.dumps(templates[name]), Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"]
            )
        yield Deployed(session, templates)
    mp.undo()


def test_every_stack_reaches_create_complete(deployed: Deployed) -> None:
    cfn = deployed.session.client("cloudformation")
    assert [cfn.describe_stacks(StackName=n)["Stacks"][0]["StackStatus"] for n in STACKS] == ["CREATE_COMPLETE"] * 3


def _environments(deployed: Deployed) -> dict[str, dict[str, Any]]:
    """Compute environments by their instance type."""
    found = deployed.batch.describe_compute_environments()["computeEnvironments"]
    return {ce["computeResources"]["instanceTypes"][0]: ce for ce in found}


def test_compute_environments_are_managed_on_demand_with_their_sizes(deployed: Deployed) -> None:
    envs = _environments(deployed)
    assert set(envs) == {"trn1.32xlarge", "p5.48xlarge", "trn1.2xlarge"}
    for ce in envs.values():
        res = ce["computeResources"]
        assert (ce["type"], ce["state"], res["type"]) == ("MANAGED", "ENABLED", "EC2")
        assert ce["serviceRole"].startswith(f"arn:aws:iam::{ENV.account}:role/")
        assert res["instanceRole"].startswith(f"arn:aws:iam::{ENV.account}:instance-profile/")
    jobs = envs["trn1.32xlarge"]["computeResources"]
    assert (jobs["minvCpus"], jobs["maxvCpus"]) == (0, 4 * catalog.get("trn1.32xlarge").vcpus)
    # No security groups in the template (EFA interfaces in the launch template); the workaround reads
    # the interfaces' groups, as Batch does: the cluster's EFA group and the Lustre client group.
    ec2 = deployed.session.client("ec2")
    groups = ec2.describe_security_groups(GroupIds=jobs["securityGroupIds"])["SecurityGroups"]
    descriptions = sorted(g["Description"] for g in groups)
    assert descriptions == ["Lustre clients (attached to nodes)", "batch-jobs: EFA and collectives within the Batch nodes"]


def test_min_size_keeps_a_node_running_in_the_clusters_subnet(deployed: Deployed) -> None:
    small = _environments(deployed)["trn1.2xlarge"]
    ec2 = deployed.session.client("ec2")
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    batch_nodes = [i for i in instances if i["InstanceType"] == "trn1.2xlarge"]
    assert len(batch_nodes) == 1  # minvCpus = 1 node of trn1.2xlarge
    (subnet,) = small["computeResources"]["subnets"]
    assert batch_nodes[0]["SubnetId"] == subnet
    # Without EFA the groups sit on the compute environment itself, and the node carries them.
    node_groups = {g["GroupId"] for g in batch_nodes[0]["SecurityGroups"]}
    assert node_groups == set(small["computeResources"]["securityGroupIds"])


def test_queues_each_hold_their_own_compute_environment(deployed: Deployed) -> None:
    envs = _environments(deployed)
    queues = {q["jobQueueName"]: q for q in deployed.batch.describe_job_queues()["jobQueues"]}
    assert set(queues) == {"batch-jobs", "batch-jobs-gpu", "batch-small"}
    expected = {"batch-jobs": "trn1.32xlarge", "batch-jobs-gpu": "p5.48xlarge", "batch-small": "trn1.2xlarge"}
    for name, instance_type in expected.items():
        order = queues[name]["computeEnvironmentOrder"]
        assert [o["computeEnvironment"] for o in order] == [envs[instance_type]["computeEnvironmentArn"]]


def test_job_definitions_are_multi_node_templates(deployed: Deployed) -> None:
    definitions = {d["jobDefinitionName"]: d for d in deployed.batch.describe_job_definitions()["jobDefinitions"]}
    assert set(definitions) == {"batch-jobs", "batch-jobs-gpu", "batch-small"}
    jobs = definitions["batch-jobs"]
    assert (jobs["type"], jobs["status"], jobs["platformCapabilities"]) == ("multinode", "ACTIVE", ["EC2"])
    nodes = jobs["nodeProperties"]
    assert (nodes["numNodes"], nodes["mainNode"]) == (4, 0)
    container = nodes["nodeRangeProperties"][0]["container"]
    assert container["image"] == IMAGE
    trn = catalog.get("trn1.32xlarge")
    assert len(container["linuxParameters"]["devices"]) == trn.neuron_devices + trn.efa_max_interfaces
    assert container["ulimits"] == [{"name": "memlock", "softLimit": -1, "hardLimit": -1}]
    gpu = definitions["batch-jobs-gpu"]["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert gpu["image"] == CUDA_IMAGE
