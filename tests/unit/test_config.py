"""Environment-file validation: every problem is one exact line naming the file, the key path and the fix.

Most cases edit one or two keys of ``tests/fixtures/environments/good.yaml``, write the result to
``environments/good.yaml`` in a temporary folder and load it from there, so each expected line is
caused by that edit alone and carries the path a user sees.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.config import ConfigError, Environment, load_all, load_environment, neuron_warnings, parse_environment

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "environments"
# Every offering message names where the offerings come from and when they were recorded (instances.json).
OFFERINGS = f"catalog offerings: {catalog.metadata()['source']}, refreshed {catalog.metadata()['generated']}"
GOOD = yaml.safe_load((FIXTURES / "good.yaml").read_text())
FILE = "environments/good.yaml"
TRAINIUM = "trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge"
CB_TYPES = "trn1.32xlarge, trn2.48xlarge, trn2u.48xlarge, p4d.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge"
TRN1_AMIS = "neuron-multi-framework-ubuntu-24.04, neuron-base-ubuntu-24.04, neuron-base-al2023, neuron-pytorch-2.9-ubuntu-24.04"
USE1_AZ_IDS = "use1-az1, use1-az2, use1-az3, use1-az4, use1-az5, use1-az6"
DELETE = object()


def edited(edits: dict[str, Any]) -> dict[str, Any]:
    """good.yaml with each dotted path ("training.0.max_size") set to its value, or removed for DELETE."""
    data = copy.deepcopy(GOOD)
    for path, value in edits.items():
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        index: Any = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[index]
        else:
            node[index] = value
    return data


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding an empty environments/, so messages name environments/<file>."""
    (tmp_path / "environments").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def problems_of(data: dict[str, Any], name: str = "good") -> list[str]:
    path = Path("environments") / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_environment(path)
    return err.value.problems


def problems_of_fixture(name: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_environment(FIXTURES.relative_to(ROOT) / name)
    return err.value.problems


# --------------------------------------------------------------------------------------------
# valid files
# --------------------------------------------------------------------------------------------
def test_good_fixture_loads_with_its_values(in_tmp: Path) -> None:
    shutil.copy(FIXTURES / "good.yaml", in_tmp / "environments" / "good.yaml")
    env = load_environment("environments/good.yaml")
    assert (env.name, env.account, env.region) == ("good", "123456789012", "us-east-1")
    assert [(c.name, c.instance_type, c.max_size, c.capacity.type) for c in env.training] == [
        ("reserved", "trn1.32xlarge", 4, "odcr"),
        ("block", "trn1.32xlarge", 8, "capacity-block"),
    ]
    assert env.lustre_az_id == "use1-az6"


def test_shipped_examples_load() -> None:
    names = [e.name for e in load_all(ROOT / "environments")]
    assert {"dev", "prod"} <= set(names) and names == sorted(names)  # the examples, and any file a user adds


def test_checkpoints_are_linked_by_default_on_every_deployment_type(in_tmp: Path) -> None:
    # Lustre 2.15 scratch (SCRATCH_2) and persistent file systems both take data repository associations
    # with automatic export (FSx user guide: only 2.10 and SCRATCH_1 lack them).
    scratch = parse_environment(edited({"storage.lustre": {"deployment_type": "SCRATCH_2"}}), FILE)
    persistent = parse_environment(edited({}), FILE)
    assert scratch.storage.lustre is not None and scratch.storage.lustre.link_checkpoints is True
    assert persistent.storage.lustre is not None and persistent.storage.lustre.link_checkpoints is True


# --------------------------------------------------------------------------------------------
# one edit -> the exact lines
# --------------------------------------------------------------------------------------------
CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "unknown-instance-type",
        {"training.0.instance_type": "trn9.big"},
        [f"training[0].instance_type: 'trn9.big' is not a known instance type; use a Trainium type: {TRAINIUM}"],
    ),
    (
        "inference-only-type-for-training",
        {"training.0.instance_type": "inf2.xlarge"},
        [
            "training[0].instance_type: 'inf2.xlarge' is an inference-only Inferentia type; "
            f"a training cluster needs a Trainium type: {TRAINIUM}"
        ],
    ),
    (
        "gpu-type-for-training",
        {"training.0.instance_type": "p5.48xlarge", "training.0.ami": DELETE},
        [
            f"training[0].instance_type: 'p5.48xlarge' is a gpu type; a training cluster needs a Trainium type: {TRAINIUM}",
        ],
    ),
    (
        "max-size-above-capacity-reservation",
        {"training.0.max_size": 6},
        [
            "training[0].max_size: max_size 6 is more than the capacity reservation holds (4); "
            "lower max_size or raise capacity.instance_count"
        ],
    ),
    (
        "max-size-above-capacity-block",
        {"training.1.max_size": 16},
        ["training[1].max_size: max_size 16 is more than the Capacity Block holds (8); lower max_size or buy a larger block"],
    ),
    (
        "az-id-not-offering-the-type",
        {"training.0.instance_type": "trn1n.32xlarge", "training.0.az_id": "use1-az4"},
        [f"training[0].az_id: trn1n.32xlarge is not offered in use1-az4 (us-east-1; {OFFERINGS}); use one of use1-az6"],
    ),
    (
        "type-offered-nowhere-in-the-region",
        {"training.0.instance_type": "trn2.48xlarge"},
        [
            f"training[0].az_id: trn2.48xlarge is not offered in use1-az6 (us-east-1; {OFFERINGS}); it is offered in no AZ "
            "of us-east-1; use another region or type"
        ],
    ),
    (
        "az-id-not-in-network",
        {"network.az_ids": ["use1-az4"], "storage.lustre.az_id": "use1-az4"},
        [
            "training[0].az_id: 'use1-az6' is not in network.az_ids; add it there",
            "training[1].az_id: 'use1-az6' is not in network.az_ids; add it there",
        ],
    ),
    (
        "min-size-above-max-size",
        {"training.0.min_size": 5},
        ["training[0].min_size: min_size 5 is greater than max_size 4; raise max_size or lower min_size"],
    ),
    (
        "desired-size-above-max-size",
        {"training.0.desired_size": 5},
        ["training[0].desired_size: 5 must lie between min_size 0 and max_size 4"],
    ),
    (
        "desired-size-below-min-size",
        {"training.0.min_size": 2, "training.0.desired_size": 1},
        ["training[0].desired_size: 1 must lie between min_size 2 and max_size 4"],
    ),
    (
        "lustre-size-on-persistent-2",
        {"storage.lustre.size_gib": 3000},
        ["storage.lustre.size_gib: 3000 is not valid for PERSISTENT_2; use 1200, 2400 or a multiple of 2400 (e.g. 2400 or 4800)"],
    ),
    (
        "lustre-size-on-scratch-2",
        {"storage.lustre": {"deployment_type": "SCRATCH_2", "size_gib": 1000}},
        ["storage.lustre.size_gib: 1000 is not valid for SCRATCH_2; use 1200, 2400 or a multiple of 2400 (e.g. 1200 or 2400)"],
    ),
    (
        "lustre-throughput-not-valid-for-persistent-2",
        {"storage.lustre.throughput_mbps_per_tib": 300},
        ["storage.lustre.throughput_mbps_per_tib: 300 is not valid for PERSISTENT_2; use one of 125, 250, 500, 1000"],
    ),
    (
        "lustre-throughput-on-scratch-2",
        {"storage.lustre.deployment_type": "SCRATCH_2", "storage.lustre.link_checkpoints": False},
        [
            "storage.lustre.throughput_mbps_per_tib: SCRATCH_2 has a fixed throughput (200 MB/s/TiB); "
            "remove the key or use PERSISTENT_2"
        ],
    ),
    (
        "lustre-throughput-missing-on-persistent-2",
        {"storage.lustre.throughput_mbps_per_tib": DELETE},
        ["storage.lustre.throughput_mbps_per_tib: required for PERSISTENT_2; use one of 125, 250, 500, 1000"],
    ),
    (
        "lustre-size-and-throughput-both-reported",
        {"storage.lustre.size_gib": 5000, "storage.lustre.throughput_mbps_per_tib": 200},
        [
            "storage.lustre.size_gib: 5000 is not valid for PERSISTENT_2; use 1200, 2400 or a multiple of 2400 (e.g. 4800 or 7200)",
            "storage.lustre.throughput_mbps_per_tib: 200 is not valid for PERSISTENT_2; use one of 125, 250, 500, 1000",
        ],
    ),
    (
        "capacity-block-type-not-sold",
        {"training.1.instance_type": "trn1.2xlarge", "training.1.capacity.instance_type": "trn1.2xlarge"},
        [f"training[1].capacity.instance_type: Capacity Blocks are not sold for trn1.2xlarge; use one of {CB_TYPES}"],
    ),
    (
        "capacity-block-in-another-az",
        {"training.1.capacity.az_id": "use1-az4"},
        ["training[1].capacity.az_id: the Capacity Block is in use1-az4, not the cluster's use1-az6; make them match"],
    ),
    (
        "capacity-block-of-another-type",
        {"training.1.capacity.instance_type": "trn2.48xlarge"},
        [
            "training[1].capacity.instance_type: the Capacity Block holds trn2.48xlarge, not the cluster's trn1.32xlarge; make them match"
        ],
    ),
    (
        "capacity-block-size",
        {"training.1.capacity.instance_count": 3, "training.1.max_size": 3},
        ["training[1].capacity.instance_count: 3 is not a Capacity Block size; use 1, 2, 4, 8, 16, 32 or 64"],
    ),
    (
        "capacity-block-ends-before-it-starts",
        {"training.1.capacity.end": "2026-11-30T11:30:00Z"},
        [
            "training[1].capacity.end: 2026-11-30T11:30:00+00:00 is not after start 2026-12-01T11:30:00+00:00; "
            "copy both from the block you bought"
        ],
    ),
    (
        "ami-family-without-the-type",
        {"training.0.ami.family": "neuron-torch-neuronx-2.14-ubuntu-24.04"},
        [
            f"training[0].ami.family: 'neuron-torch-neuronx-2.14-ubuntu-24.04' does not support trn1.32xlarge; use one of {TRN1_AMIS}"
        ],
    ),
    (
        "unknown-ami-family",
        {"training.0.ami.family": "neuron-ubuntu"},
        [
            "training[0].ami.family: 'neuron-ubuntu' is not a known AMI family; use one of neuron-multi-framework-ubuntu-24.04, "
            "neuron-base-ubuntu-24.04, neuron-base-al2023, neuron-pytorch-2.9-ubuntu-24.04, neuron-torch-neuronx-2.14-ubuntu-24.04"
        ],
    ),
    (
        "gpu-ami-family-for-trainium",
        {"training.0.ami.family": "gpu-base-oss-ubuntu-22.04"},
        [f"training[0].ami.family: 'gpu-base-oss-ubuntu-22.04' does not support trn1.32xlarge; use one of {TRN1_AMIS}"],
    ),
    (
        "inf1-type-explicit-ami",
        {"training.0.instance_type": "inf1.xlarge"},
        [
            "training[0].instance_type: 'inf1.xlarge' is an inference-only Inferentia type; "
            f"a training cluster needs a Trainium type: {TRAINIUM}",
            "training[0].ami.family: 'neuron-multi-framework-ubuntu-24.04' does not support inf1.xlarge; "
            "pin an ami_id of an AMI that supports it (Neuron DLAMIs dropped Inf1 in 2.26.1)",
        ],
    ),
    (
        "inf1-type-default-ami",
        {"training.1.instance_type": "inf1.24xlarge", "training.1.capacity": {"type": "on-demand"}},
        [
            "training[1].instance_type: 'inf1.24xlarge' is an inference-only Inferentia type; "
            f"a training cluster needs a Trainium type: {TRAINIUM}",
            "training[1].ami.family: the default AMI family 'neuron-multi-framework-ubuntu-24.04' does not support inf1.24xlarge; "
            "pin an ami_id of an AMI that supports it (Neuron DLAMIs dropped Inf1 in 2.26.1)",
        ],
    ),
    (
        "malformed-region",
        {"region": "us-east"},
        ["region: 'us-east' is malformed; use a region code such as us-east-1"],
    ),
    (
        "malformed-account",
        {"account": "12345"},
        ["account: '12345' is malformed; use the 12-digit account id, e.g. '123456789012' (quoted)"],
    ),
    (
        "unquoted-account",
        {"account": 123456789012},
        ["account: 123456789012 is a number, not text; put it in quotes: '123456789012'"],
    ),
    (
        "az-name-instead-of-az-id",
        {"training.0.az_id": "us-east-1a"},
        ["training[0].az_id: 'us-east-1a' is malformed; use an AZ ID such as use1-az6 (not an AZ name like us-east-1a)"],
    ),
    (
        "network-az-id-of-another-region",
        {"network.az_ids": ["use1-az6", "usw2-az1"]},
        [f"network.az_ids[1]: 'usw2-az1' is not an AZ ID of us-east-1; use one of {USE1_AZ_IDS}"],
    ),
    (
        "cluster-az-id-of-another-region",
        {"training.0.az_id": "usw2-az1"},
        [f"training[0].az_id: 'usw2-az1' is not an AZ ID of us-east-1; use one of {USE1_AZ_IDS}"],
    ),
    (
        "lustre-az-id-not-in-network",
        {"storage.lustre.az_id": "use1-az5"},
        ["storage.lustre.az_id: 'use1-az5' is not in network.az_ids; add it there or pick one of use1-az6, use1-az4"],
    ),
    (
        "duplicate-az-ids",
        {"network.az_ids": ["use1-az6", "use1-az6"]},
        ["network.az_ids[1]: 'use1-az6' is listed twice; AZ IDs must be unique, remove one"],
    ),
    (
        "duplicate-cluster-names",
        {"training.1.name": "reserved"},
        ["training[1].name: 'reserved' is already the name of training[0]; give each cluster its own name"],
    ),
    (
        "odcr-create-and-existing-id",
        {"training.0.capacity.reservation_id": "cr-0123456789abcdef0"},
        [
            "training[0].capacity.create: set create: false to use the existing reservation_id "
            "(create: true, the default, makes a new reservation)"
        ],
    ),
    (
        "odcr-neither-create-nor-id",
        {"training.0.capacity.create": False},
        [
            "training[0].capacity.reservation_id: required with create: false; name the existing reservation (cr-...) or set create: true"
        ],
    ),
    (
        "unknown-capacity-type",
        {"training.0.capacity.type": "spot"},
        ["training[0].capacity: type 'spot' is not allowed; use one of 'on-demand', 'odcr', 'capacity-block'"],
    ),
    (
        "capacity-without-type",
        {"training.0.capacity.type": DELETE},
        ["training[0].capacity: add a type key: one of 'on-demand', 'odcr', 'capacity-block'"],
    ),
    (
        "unknown-deployment-type",
        {"storage.lustre.deployment_type": "PERSISTENT_1"},
        ["storage.lustre.deployment_type: 'PERSISTENT_1' is not allowed; use 'SCRATCH_2' or 'PERSISTENT_2'"],
    ),
    (
        "missing-required-top-level-key",
        {"account": DELETE},
        ["account: required key is missing; add it (12-digit AWS account id)"],
    ),
    (
        "missing-required-nested-key",
        {"training.0.max_size": DELETE},
        ["training[0].max_size: required key is missing; add it (most nodes the cluster scales out to)"],
    ),
    (
        "unknown-top-level-key",
        {"training": DELETE, "trainig": []},
        ["trainig: unknown key 'trainig' at the top level; did you mean 'training'?"],
    ),
    (
        "unknown-nested-key",
        {"training.0.max_nodes": 4},
        [
            "training[0].max_nodes: unknown key 'max_nodes' under training[0]; allowed keys: name, instance_type, az_id, "
            "min_size, max_size, desired_size, ami, capacity, root_volume_gib, compile_cache, scale_in_protection, idle_scale_down, scheduler, container_image, neuron_sdk, workload, gpu_pool, ultraserver, lnc, cluster_queue"
        ],
    ),
    (
        "unknown-key-inside-a-capacity-block",
        {"training.1.capacity.reservation": "cr-0123456789abcdef0"},
        [
            "training[1].capacity.reservation: unknown key 'reservation' under training[1].capacity; did you mean 'reservation_id'?"
        ],
    ),
    # One strictness: numbers and booleans without quotes, as the account id must be in quotes.
    ("number-in-quotes", {"training.0.max_size": "4"}, ["training[0].max_size: '4' is text; write a number without quotes"]),
    (
        "boolean-in-quotes",
        {"training.0.idle_scale_down": "yes"},
        ["training[0].idle_scale_down: 'yes' is text; write true or false without quotes"],
    ),
    ("not-a-number", {"training.0.max_size": 2.5}, ["training[0].max_size: 2.5 is not a whole number; write e.g. 4"]),
    ("out-of-range", {"training.0.max_size": 0}, ["training[0].max_size: 0 is out of range; use at least 1"]),
    ("a-list-where-a-mapping-goes", {"storage": ["lustre"]}, ["storage: expected a mapping, got list"]),
    (
        "tags-aws-refuses",
        {"tags": {"aws:team": "x", "owner": "v" * 300}},
        [
            "tags.aws:team: keys starting with aws: are reserved by AWS; rename the key",
            "tags.owner: a tag value holds at most 256 characters, this one 300; shorten it",
        ],
    ),
]


@pytest.mark.parametrize(("edits", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_problem_is_one_exact_line(in_tmp: Path, edits: dict[str, Any], expected: list[str]) -> None:
    assert problems_of(edited(edits)) == [f"{FILE}: {line}" for line in expected]


# --------------------------------------------------------------------------------------------
# whole files
# --------------------------------------------------------------------------------------------
def test_independent_problems_in_different_sections_are_all_reported_in_one_run() -> None:
    # Before: the typo and the Lustre size (field errors) stopped pydantic before the cross checks,
    # so the unknown instance type of training[1] only showed up on the next run.
    path = "tests/fixtures/environments/three-problems.yaml"
    assert problems_of_fixture("three-problems.yaml") == [
        f"{path}: storage.lustre.size_gib: 3000 is not valid for SCRATCH_2; use 1200, 2400 or a multiple of 2400 (e.g. 2400 or 4800)",
        f"{path}: cost_centre: unknown key 'cost_centre' at the top level; did you mean 'cost_center'?",
        f"{path}: training[1].instance_type: 'trn1.64xlarge' is not a known instance type; use a Trainium type: {TRAINIUM}",
    ]


def test_cross_checks_of_valid_clusters_run_when_another_cluster_is_broken(in_tmp: Path) -> None:
    data = edited({"training.0.max_nodes": 4, "training.1.capacity.az_id": "use1-az4"})
    assert problems_of(data) == [
        f"{FILE}: training[0].max_nodes: unknown key 'max_nodes' under training[0]; allowed keys: name, instance_type, az_id, "
        "min_size, max_size, desired_size, ami, capacity, root_volume_gib, compile_cache, scale_in_protection, idle_scale_down, scheduler, container_image, neuron_sdk, workload, gpu_pool, ultraserver, lnc, cluster_queue",
        f"{FILE}: training[1].capacity.az_id: the Capacity Block is in use1-az4, not the cluster's use1-az6; make them match",
    ]


def test_misspelled_keys_at_top_level_and_in_a_cluster_are_reported() -> None:
    path = "tests/fixtures/environments/typos.yaml"
    assert problems_of_fixture("typos.yaml") == [
        f"{path}: training[0].max_size: required key is missing; add it (most nodes the cluster scales out to)",
        f"{path}: training[0].max_nodes: unknown key 'max_nodes' under training[0]; did you mean 'max_size'?",
        f"{path}: trainig: unknown key 'trainig' at the top level; did you mean 'training'?",
    ]


def test_yaml_syntax_error_names_line_and_column() -> None:
    assert problems_of_fixture("bad-indent.yaml") == [
        "tests/fixtures/environments/bad-indent.yaml: not valid YAML at line 9, column 11: mapping values are not allowed here; "
        "check the indentation and quoting on that line and the one before"
    ]


def test_key_given_twice_is_an_error_not_a_silent_overwrite() -> None:
    assert problems_of_fixture("duplicate-key.yaml") == [
        "tests/fixtures/environments/duplicate-key.yaml: not valid YAML at line 11, column 5: "
        "key 'max_size' is given twice in one mapping (first at line 10); keep one"
    ]


def test_yaml_merge_keys_may_be_overridden(in_tmp: Path) -> None:
    text = (FIXTURES / "good.yaml").read_text().replace("  - name: block\n", "  - &reserved\n    name: block\n", 1)
    text += "  - <<: *reserved\n    name: third\n    capacity: {type: on-demand}\n"
    Path(FILE).write_text(text)
    assert [(c.name, c.capacity.type) for c in load_environment(FILE).training] == [
        ("reserved", "odcr"),
        ("block", "capacity-block"),
        ("third", "on-demand"),
    ]


def test_name_differing_from_the_file_name() -> None:
    assert problems_of_fixture("renamed.yaml") == [
        "tests/fixtures/environments/renamed.yaml: name: 'staging' differs from the file name 'renamed'; rename the file or the key"
    ]


def test_name_mismatch_is_reported_with_the_other_problems(in_tmp: Path) -> None:
    assert problems_of(edited({"name": "prod", "region": "us-east"})) == [
        f"{FILE}: name: 'prod' differs from the file name 'good'; rename the file or the key",
        f"{FILE}: region: 'us-east' is malformed; use a region code such as us-east-1",
    ]


def test_file_without_keys() -> None:
    assert problems_of_fixture("empty.yaml") == [
        "tests/fixtures/environments/empty.yaml: the file must hold a mapping of keys (name, account, region, ...)"
    ]


def test_missing_file(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_environment("environments/nope.yaml")
    assert err.value.problems == ["environments/nope.yaml: cannot read the file (No such file or directory)"]


# --------------------------------------------------------------------------------------------
# load_all: -c env=NAME and problems across files
# --------------------------------------------------------------------------------------------
def test_unknown_environment_name_lists_the_known_ones(in_tmp: Path) -> None:
    shutil.copy(FIXTURES / "good.yaml", in_tmp / "environments")
    shutil.copy(FIXTURES / "renamed.yaml", in_tmp / "environments")
    with pytest.raises(ConfigError) as err:
        load_all("environments", only="staging")
    assert err.value.problems == ["environments/staging.yaml: no such environment; known environments: good, renamed"]


def test_known_environment_name_loads_only_that_file(in_tmp: Path) -> None:
    shutil.copy(FIXTURES / "good.yaml", in_tmp / "environments")
    shutil.copy(FIXTURES / "renamed.yaml", in_tmp / "environments")  # invalid, but not selected
    assert [e.name for e in load_all("environments", only="good")] == ["good"]


def test_load_all_reports_the_problems_of_every_file(in_tmp: Path) -> None:
    for name in ("good.yaml", "renamed.yaml", "empty.yaml"):
        shutil.copy(FIXTURES / name, in_tmp / "environments")
    with pytest.raises(ConfigError) as err:
        load_all("environments")
    assert err.value.problems == [
        "environments/empty.yaml: the file must hold a mapping of keys (name, account, region, ...)",
        "environments/renamed.yaml: name: 'staging' differs from the file name 'renamed'; rename the file or the key",
    ]


def test_environment_model_reports_cross_problems_on_direct_validation() -> None:
    # Code that builds an Environment without parse_environment still gets the cross checks.
    with pytest.raises(ValueError, match=r"training\[0\]\.min_size: min_size 5 is greater than max_size 4"):
        Environment.model_validate(edited({"training.0.min_size": 5}))


def test_a_file_system_that_follows_a_cluster_is_a_warning() -> None:
    import copy

    import yaml

    from neuronkit.config import parse_environment

    data = copy.deepcopy(yaml.safe_load((Path(__file__).resolve().parents[2] / "environments" / "prod.yaml").read_text()))

    # prod's chat fleet serves on Inf2, whose line is in maintenance: that warning is the serving line's (test_summary)
    def storage(warnings: list[str]) -> list[str]:
        return [w for w in warnings if " serves on " not in w]

    assert storage(parse_environment(copy.deepcopy(data), "environments/prod.yaml").warnings) == []  # prod pins it
    del data["storage"]["lustre"]["az_id"]
    env = parse_environment(data, "environments/prod.yaml")
    assert storage(env.warnings) == [
        "storage.lustre.az_id: not set, so the file system follows training[0].az_id (use2-az1); moving that cluster "
        "would replace the file system and lose its data. Set storage.lustre.az_id: use2-az1 to pin it"
    ]


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    from neuronkit.config import load_environment

    path = tmp_path / "latin.yaml"
    path.write_bytes(b'name: latin\naccount: "111111111111"\n# caf\xe9\n')
    with pytest.raises(ConfigError) as err:
        load_environment(path)
    (line,) = err.value.problems
    assert line.endswith("latin.yaml: not UTF-8 text (byte 0xe9 at offset 41); save the file as UTF-8")


def test_pools_the_vpc_cannot_hold_are_refused_with_the_fix(in_tmp: Path) -> None:
    # A /20 of two AZ IDs: 2,000 nodes in one AZ need a /20 subnet of their own (twice over), so a larger block fixes it.
    problems = problems_of(edited({"network.cidr": "10.0.0.0/20", "training.0.max_size": 2000}))
    (line,) = [p for p in problems if "network.cidr" in p]
    assert line.startswith("environments/good.yaml: network.cidr: 10.0.0.0/20 cannot hold subnets for the pools at their")
    assert "use1-az6 needs" in line and "use a larger network.cidr" in line
    # 40,000 nodes exceed what any VPC block can hold (AWS allows at most a /16).
    problems = problems_of(edited({"training.0.max_size": 40000}))
    (line,) = [p for p in problems if "network.cidr" in p]
    assert line.endswith("no VPC holds that: lower max_size or spread the pools over more AZ IDs")
    # Reported together with a problem elsewhere in the file (the cross checks run per section then).
    problems = problems_of(edited({"training.0.max_size": 40000, "training.1.root_volume_gib": 70000}))
    assert any("network.cidr" in p for p in problems)
    assert "environments/good.yaml: training[1].root_volume_gib: 70000 is out of range; use at most 65536" in problems


def test_an_existing_vpc_is_not_sized_by_the_kit(in_tmp: Path) -> None:
    data = edited({"training.0.max_size": 40000, "training.0.capacity": {"type": "on-demand"}})
    data["network"]["existing"] = {
        "vpc_id": "vpc-0123456789abcdef0",
        "subnet_ids": {"use1-az6": "subnet-0123456789abcdef0", "use1-az4": "subnet-0123456789abcdef1"},
    }
    path = Path("environments") / "good.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_environment(path).network.existing is not None  # loads: the VPC's owner sized its subnets


# --------------------------------------------------------------------------------------------
# One offering rule: outside the catalog's offerings a Capacity Block or UltraServer cluster warns, anything else
# is refused, and both name where the offerings come from and when they were recorded.
# --------------------------------------------------------------------------------------------
FRONTIER = ROOT / "tests" / "fixtures" / "user_environments" / "frontier.yaml"


def _frontier() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(FRONTIER.read_text())
    return data


def test_a_capacity_block_outside_the_offerings_warns_naming_the_source_and_its_date() -> None:
    data = _frontier()
    cluster = data["training"][0]
    assert cluster["az_id"] not in catalog.get(cluster["instance_type"]).az_ids(data["region"])  # the case at hand
    env = parse_environment(data, "environments/frontier.yaml")
    (line,) = [w for w in neuron_warnings(env) if w.startswith("training[0].az_id: ")]
    assert f"trn2.48xlarge is not offered in usw2-az1 (us-west-2; {OFFERINGS}); accepted because" in line
    assert "Capacity Block" in line and "neuronkit preflight" in line


def test_the_same_cluster_on_a_reservation_is_refused_with_the_same_naming() -> None:
    data = _frontier()
    data["training"][0]["capacity"] = {"type": "odcr", "create": True, "instance_count": 16}
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/frontier.yaml")
    assert (
        f"environments/frontier.yaml: training[0].az_id: trn2.48xlarge is not offered in usw2-az1 (us-west-2; {OFFERINGS})"
        in (err.value.problems[0])
    )


def test_an_on_demand_fallback_outside_the_offerings_is_refused() -> None:
    data = _frontier()
    data["training"][0]["capacity"]["fallback"] = "on-demand"
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/frontier.yaml")
    (line,) = err.value.problems
    assert line.startswith("environments/frontier.yaml: training[0].capacity.fallback: on-demand trn2.48xlarge is not offered")
    assert OFFERINGS in line and "use fallback: gpu-pool or none" in line


def test_inside_the_offerings_nothing_warns() -> None:
    env = load_environment(ROOT / "environments" / "prod.yaml")  # trn2.48xlarge on a block in use2-az1, offered there
    assert not [w for w in neuron_warnings(env) if "is not offered" in w]
