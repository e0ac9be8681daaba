"""The node check as it runs in a job's pod: in the boot sandbox (tests/sandbox.py), with exactly the PATH,
LD_LIBRARY_PATH and user of each pinned training image (tests/fixtures/images/, each line cited from the image's
Dockerfile), the tools placed where the Dockerfile puts them and nothing else added, fake devices per instance type
from the catalog (no /dev/infiniband without EFA) and recorded tool outputs (tests/fixtures/prejob/).

The command and the pod's variables are the rendered node-check container's (``training_job.node_check_args`` and its
``env``), the program the job's ConfigMap ships (``prejob.py``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.kubernetes import prejob
from neuronkit.kubernetes import training_job as tj
from tests import image_env
from tests.conftest import ROOT
from tests.sandbox import Run, Scenario, available, run_user_data

FIX = ROOT / "tests" / "fixtures" / "prejob"
NODE = "ip-10-30-4-17.us-east-2.compute.internal"
RELEASE = "2.28.1"
HEALTHY = {
    "trn2.48xlarge": ("neuron-ls-trn2-healthy.json", "fi_info-efa-trn2-healthy.txt"),
    "trn1.32xlarge": ("neuron-ls-trn1-healthy.json", "fi_info-efa-trn1-healthy.txt"),
}
PINNED = sorted({img for v in releases.versions() if (img := releases.release(v).container("training"))})


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runs_here() -> None:
    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)


def _spec(instance_type: str) -> tj.JobSpec:
    return tj.JobSpec(
        name="llama", environment="team", pool="pretrain", instance_type=instance_type, nodes=2, release=RELEASE,
        datasets_bucket="d", checkpoints_bucket="c",
    )  # fmt: skip


def _node_check(spec: tj.JobSpec) -> tuple[list[str], dict[str, str]]:
    pod = tj.render_jobset(spec)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = next(c for c in pod["initContainers"] if c["name"] == tj.NODE_CHECK_CONTAINER)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    return list(container["command"]), env


def _rdm_names(fi_info: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"domain:\s*(\S+)-rdm\b", fi_info)))


def run_node_check(
    tmp_path: Path, instance_type: str, image: str, *, fi_info: str | None = None, neuron_ls: str | None = None
) -> Run:
    """The rendered node check, in the image's environment, on a healthy ``instance_type`` node (its recorded
    outputs) unless a recording is replaced."""
    spec = _spec(instance_type)
    command, pod_env = _node_check(spec)
    fake = image_env.of(image)
    ls_file, fi_file = HEALTHY.get(instance_type, ("neuron-ls-trn1.2xlarge-healthy.json", ""))
    healthy_fi = (FIX / fi_file).read_text() if fi_file else ""
    scenario = Scenario.of(
        instance_type,
        driver=releases.release(RELEASE).driver,
        stub_files={
            "rec-neuron-ls": (FIX / (neuron_ls or ls_file)).read_text(),
            "rec-fi_info": (FIX / fi_info).read_text() if fi_info else healthy_fi,
            "rec-nccom-test": (FIX / "nccom-test-healthy.txt").read_text(),
            "rec-mounts": "fs-0123.fsx.us-east-2.amazonaws.com@tcp:/abcdefgh /fsx lustre rw,flock,lazystatfs 0 0\n",
            "prejob.py": (Path(prejob.__file__)).read_text(),
        },
    )
    tools = {
        "neuron-ls": "cat /opt/stubs/rec-neuron-ls\n",
        "nccom-test": 'echo "nccom-test $*" >> /var/log/stub-calls\ncat /opt/stubs/rec-nccom-test\n',
        # libfabric answers only where the kernel created EFA devices (fi_info(1): -61, no data, otherwise)
        "fi_info": (
            'echo "fi_info $*" >> /var/log/stub-calls\n'
            '[ -d /dev/infiniband ] || { echo "fi_getinfo: -61 (No data available)"; exit 61; }\n'
            "cat /opt/stubs/rec-fi_info\n"
        ),
    }
    lines = ["#!/bin/bash", "set -euo pipefail"]
    for name, body in tools.items():
        where = fake.tools[name]
        lines += [f"mkdir -p {Path(where).parent}", f"cat > {where} <<'TOOL'\n#!/bin/bash\n{body}TOOL", f"chmod 0755 {where}"]
    # python3 at the image's place (the machine's interpreter stands in for the image's)
    lines += [f"mkdir -p {Path(fake.tools['python3']).parent}", f"ln -sf /usr/bin/python3 {fake.tools['python3']}"]
    # the ConfigMap's programs at the kit mount; the driver's sysfs entry; the EFA devices' RDMA names (sysfs)
    lines += [f"mkdir -p {tj.KIT_MOUNT}", f"cp /opt/stubs/prejob.py {tj.KIT_MOUNT}/prejob.py"]
    lines += ["mkdir -p /sys/module/neuron", "cat /opt/stubs/driver > /sys/module/neuron/version"]
    for i, name in enumerate(_rdm_names(healthy_fi)[: scenario.efa_devices]):
        lines += [f"mkdir -p {prejob.VERBS_CLASS}/uverbs{i}", f"echo {name} > {prejob.VERBS_CLASS}/uverbs{i}/ibdev"]
    env = {**pod_env, **fake.env(), "NODE_NAME": NODE, "NEURONKIT_PREJOB_MOUNTS": "/opt/stubs/rec-mounts"}
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    lines.append(f"exec /usr/bin/env -i {assignments} {shlex.join(command)}")
    return run_user_data("\n".join(lines) + "\n", scenario, tmp_path)


def test_every_pinned_training_image_has_a_fake_from_its_dockerfile() -> None:
    assert PINNED
    for image in PINNED:
        fake = image_env.of(image)
        assert fake.user == "root" and fake.source["repository"] == "aws-neuron/deep-learning-containers"
        assert re.fullmatch(r"[0-9a-f]{40}", fake.source["commit"])
        assert {"neuron-ls", "nccom-test", "fi_info", "sshd", "ssh-keygen", "python3", "mpirun"} <= set(fake.tools)


@pytest.mark.parametrize("image", PINNED)
def test_fi_info_is_called_where_the_efa_installer_puts_it_not_by_name(image: str) -> None:
    """The images run the EFA installer but never put /opt/amazon/efa/bin on PATH: a bare ``fi_info`` is not found
    in the job's pods, and every EFA node would fail its check."""
    fake = image_env.of(image)
    assert not fake.on_path("fi_info") and "fi_info" in fake.not_on_path
    assert prejob.FI_INFO == fake.tools["fi_info"]
    for tool in ("neuron-ls", "nccom-test", "python3", "ssh-keygen", "mpirun"):
        assert fake.on_path(tool), tool


@pytest.mark.parametrize("image", PINNED)
@pytest.mark.parametrize("instance_type", sorted(HEALTHY))
def test_a_healthy_node_passes_the_check_in_the_images_environment(tmp_path: Path, instance_type: str, image: str) -> None:
    run = run_node_check(tmp_path, instance_type, image)
    assert run.returncode == 0, run.output
    it = catalog.get(instance_type)
    assert f"node {NODE}: devices: ok: {it.neuron_devices} Neuron devices" in run.output
    assert f"node {NODE}: efa: ok: {it.efa_max_interfaces} EFA interfaces answer" in run.output
    assert f"node {NODE}: runtime: ok:" in run.output and f"node {NODE}: lustre: ok:" in run.output
    assert run.called("fi_info -p efa") and run.called("nccom-test -r")


def test_a_missing_efa_interface_fails_the_check_and_is_named(tmp_path: Path) -> None:
    run = run_node_check(tmp_path, "trn2.48xlarge", PINNED[0], fi_info="fi_info-efa-trn2-missing-interface.txt")
    assert run.returncode == 1, run.output
    n = catalog.get("trn2.48xlarge").efa_max_interfaces
    assert (
        f"node {NODE}: efa: FAILED: {n - 1} EFA interfaces answer fi_info -p efa, expected {n}; "
        "no answer from rdmap81s0 (/dev/infiniband/uverbs" in run.output
    )
    assert '"Check": "efa"' in run.output  # the PreJobCheckFailed metric line


def test_a_bare_fi_info_is_not_found_in_the_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the check did before: ``fi_info`` by name fails on a healthy trn2 node in the image's environment."""
    source = Path(prejob.__file__).read_text().replace('FI_INFO = "/opt/amazon/efa/bin/fi_info"', 'FI_INFO = "fi_info"')
    bare = tmp_path / "prejob.py"
    bare.write_text(source)
    monkeypatch.setattr(prejob, "__file__", str(bare))
    run = run_node_check(tmp_path / "run", "trn2.48xlarge", PINNED[0])
    assert run.returncode == 1
    assert (
        f"node {NODE}: efa: FAILED: fi_info -p efa failed (exit 127): no EFA provider answers: fi_info: not found" in run.output
    )


def test_a_type_without_efa_is_not_asked_for_it(tmp_path: Path) -> None:
    """trn1.2xlarge has no EFA: the sandbox node has no /dev/infiniband and the check does not run fi_info."""
    run = run_node_check(tmp_path, "trn1.2xlarge", PINNED[0])
    assert run.returncode == 0, run.output
    assert "efa:" not in run.output and not run.called("fi_info")
    assert f"node {NODE}: lustre: ok:" in run.output
