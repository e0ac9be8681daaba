"""`neuronkit summary`: Markdown for pull requests from the example environments' synth (the session's cdk.out).

The whole document is a syrupy snapshot in Markdown (tests/unit/__snapshots__/test_summary/), so a pull
request that changes what is synthesized shows the change in the summary; the Mermaid diagrams are also
checked structurally, since a broken diagram renders as an error box in the PR comment.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from neuronkit import catalog
from neuronkit.cli import main
from neuronkit.reports import cost
from neuronkit.reports.summary import EnvironmentView, environments, mermaid, summarize
from tests.conftest import ROOT, Synth
from tests.project import EXAMPLES, environment_of
from tests.project import environments as project_environments


class MarkdownSnapshot(SingleFileSnapshotExtension):
    file_extension = "md"
    _write_mode = WriteMode.TEXT


@pytest.fixture(scope="module")
def views(synth: Synth) -> dict[str, EnvironmentView]:
    return {v.name: v for v in environments(synth.outdir)}


@pytest.fixture(scope="module")
def examples_out(synth: Synth, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cdk.out narrowed to the examples (dev, prod): the summary tests below are about them, and
    the snapshot holds them alone whatever other files the project has."""
    out = tmp_path_factory.mktemp("examples.out")
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    keep = {k: v for k, v in manifest["artifacts"].items() if v.get("type") != "aws:cloudformation:stack" and "." not in k} | {
        k: v for k, v in manifest["artifacts"].items() if environment_of(k.split(".")[0], strict=False) in EXAMPLES
    }
    for path in synth.outdir.glob("*.json"):
        shutil.copy(path, out / path.name)
    (out / "manifest.json").write_text(json.dumps({**manifest, "artifacts": keep}))
    return out


@pytest.fixture(scope="module")
def markdown(examples_out: Path) -> str:
    return summarize(examples_out)


@pytest.fixture(scope="module")
def examples_markdown(markdown: str) -> str:
    return markdown


@pytest.fixture(scope="module")
def project_markdown(synth: Synth) -> str:
    """The summary of every environment of the project."""
    return summarize(synth.outdir)


def test_summary_snapshot(examples_markdown: str, snapshot: SnapshotAssertion) -> None:
    assert examples_markdown == snapshot.use_extension(MarkdownSnapshot)


def _row(markdown: str, *cells: str) -> list[str]:
    """The cells of the one table row that starts with ``cells``."""
    prefix = "| " + " | ".join(cells) + " |"
    (line,) = [line for line in markdown.splitlines() if line.startswith(prefix)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_pool_rows_carry_catalog_facts(markdown: str) -> None:
    row = _row(markdown, "prod-training", "pretrain")
    it = catalog.get("trn2.48xlarge")
    # A Capacity Block cluster is empty until its block starts (its schedule scales it up then).
    assert row[2:5] == ["training", "trn2.48xlarge", "0/0/16"]
    assert row[5] == f"{it.neuron_devices} ({it.neuron_devices * 16} at max)"
    assert row[6] == f"{it.neuron_cores} ({it.neuron_cores * 16} at max)"
    assert row[8:12] == [str(it.efa_max_interfaces), f"{it.efa_bandwidth_gbps:g} Gbps", "capacity-block", "use2-az1"]
    dev = _row(markdown, "dev-training", "dev")
    assert dev[4] == "0/0/1" and dev[9] == "no EFA" and dev[10] == "on-demand"


def test_a_fleet_row_shows_its_gpu_fallback_and_every_az_id(project_markdown: str) -> None:
    markdown = project_markdown
    fleets = [(e, f) for e in project_environments().values() for f in e.inference]
    assert any(f.fallback_types for _, f in fleets), "no fleet falls back to GPUs: this test would check nothing"
    for env, fleet in fleets:
        top = fleet.max_size
        primary = catalog.get(fleet.neuron_types[0])
        if env.platform == "eks":  # a node group per fleet, and one more for its GPU fallback types (docs/eks.md)
            row = _row(markdown, f"{env.name}-eks", fleet.name)
            assert row[7] == str(primary.gpus) and row[11] == ", ".join(sorted(fleet.az_ids))
            # The GPU node groups: a served fleet's one per type, in the file's order (issue 49); a fleet without a
            # model one group, its first type, then each other type as its fallback.
            from neuronkit.kubernetes.serving import headroom_nodes
            from neuronkit.reports.pools import eks_fallback_groups

            for name, types in eks_fallback_groups(fleet.name, fleet.fallback_types, fleet.model is not None):
                first, *rest = types
                gpu = _row(markdown, f"{env.name}-eks", name)
                assert gpu[3] == ", ".join(types)
                # A served fleet's GPU node group keeps room for a surge pod above the serving maximum (issue 49).
                most = top + (headroom_nodes("gpu") if fleet.model is not None else 0)
                assert gpu[7] == f"{catalog.get(first).gpus} ({catalog.get(first).gpus * most} at max)" + "".join(
                    f"; {t} fallback: {catalog.get(t).gpus} ({catalog.get(t).gpus * most} at max)" for t in rest
                )
            continue
        row = _row(markdown, f"{env.name}-inference", fleet.name)
        expected = str(primary.gpus) + "".join(
            f"; {t} fallback: {catalog.get(t).gpus} ({catalog.get(t).gpus * top} at max)" for t in fleet.fallback_types
        )
        assert row[7] == expected
        assert row[11] == ", ".join(sorted(fleet.az_ids))


def test_alarm_thresholds_are_in_the_metrics_units(markdown: str) -> None:
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "FreeDataStorageCapacity" in line]
    assert rows
    assert all(re.search(r"LessThan [\d.,]+ (GiB|TiB) \|$", line) for line in rows), rows
    latency = [line for line in markdown.splitlines() if "TargetResponseTime" in line]
    assert latency and all(re.search(r"GreaterThan [\d.]+ s \|$", line) for line in latency), latency


def test_storage_rows_show_file_system_type_size_and_retention(markdown: str) -> None:
    prod = _row(markdown, "prod-storage", "FSx for Lustre")
    assert "PERSISTENT_2" in prod[3] and "4800 GiB" in prod[3] and "250 MB/s per TiB" in prod[3]
    assert prod[4] == "retained"
    dev = _row(markdown, "dev-storage", "FSx for Lustre")
    assert "SCRATCH_2" in dev[3] and "1200 GiB" in dev[3]
    checkpoints = _row(markdown, "prod-storage", "S3 bucket", "prod-checkpoints-222222222222-us-east-2")
    assert "versioned" in checkpoints[3] and checkpoints[4] == "retained"


def test_cost_estimate_comes_from_neuronkit_cost(markdown: str, views: dict[str, EnvironmentView]) -> None:
    (priced,) = [c for c in cost.price_pools([p.pool for p in views["prod"].pools]) if c.pool.pool == "pretrain"]
    row = _row(markdown, "pretrain", "trn2.48xlarge")
    assert row[-2:] == [cost.usd(priced.monthly("desired")), cost.usd(priced.monthly("max"))]


def test_cost_section_is_left_out_when_cost_cannot_price_pools(synth: Synth, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(cost, "price_pools")
    text = summarize(synth.outdir)
    assert "Cost estimate" not in text and "#### Compute pools" in text


# --------------------------------------------------------------------------------------------
# Mermaid
# --------------------------------------------------------------------------------------------
_DECL = re.compile(r"^\s*(?:subgraph\s+)?([A-Za-z0-9_]+)\s*(?:\[\[|\[\(|\[|\(\(|\{\{)")
_EDGE = re.compile(r"^\s*([A-Za-z0-9_]+)\s+(?:-->|-\.[^.]*\.->|==>)\s+([A-Za-z0-9_]+)\s*$")


def _balanced(text: str) -> bool:
    pairs = {"]": "[", ")": "(", "}": "{"}
    stack: list[str] = []
    for ch in text:
        if ch in "[({":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_mermaid_is_structurally_valid(views: dict[str, EnvironmentView], env: str) -> None:
    text = mermaid(views[env])
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    declared = {m.group(1) for line in lines if (m := _DECL.match(line))}
    edges = [m.groups() for line in lines if (m := _EDGE.match(line))]
    assert edges, "a diagram without edges shows no relationship"
    for a, b in edges:
        assert a in declared and b in declared, (a, b)
    body = [line for line in lines[1:] if line.strip()]
    # every line declares a node, opens or closes a subgraph, or is an edge: nothing Mermaid would reject
    assert all(_DECL.match(line) or _EDGE.match(line) or line.strip() == "end" for line in body)
    assert sum(line.strip().startswith("subgraph") for line in body) == sum(line.strip() == "end" for line in body)
    assert _balanced(text)
    assert text.count('"') % 2 == 0


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_mermaid_puts_the_pool_behind_a_subnet_of_its_az_id(views: dict[str, EnvironmentView], env: str) -> None:
    view = views[env]
    text = mermaid(view)
    # the Trainium cluster (a scheduler: batch cluster is a pool too, its compute environment's)
    (pool,) = [p for p in view.pools if p.pool.role == "training" and p.meta.get("scheduler") != "batch"]
    az_id = {"dev": "use1-az6", "prod": "use2-az1"}[env]  # the cluster's az_id in the file
    assert pool.az_id == az_id and pool.subnets
    az_block = text.split(f'["{az_id}"]', 1)[1].split("end", 1)[0]
    for subnet in pool.subnets:
        assert subnet in az_block
        assert re.search(rf"^\s*{subnet} --> \S*{pool.logical_id}$", text, re.M)
    # pool -> storage: every file system and every bucket but the access-log bucket
    storage_edges = re.findall(rf"{pool.logical_id} --> (\S+)", text)
    assert len(storage_edges) == len(view.storage) - 1
    assert any("Lustre" in e for e in storage_edges)


# --------------------------------------------------------------------------------------------
# the folder and the command
# --------------------------------------------------------------------------------------------
def test_stale_templates_outside_the_manifest_are_ignored(synth: Synth, tmp_path: Path) -> None:
    folder = tmp_path / "cdk.out"
    shutil.copytree(synth.outdir, folder)
    stale = json.loads((folder / "prod-training.template.json").read_text())
    for resource in stale["Resources"].values():
        if resource["Type"] == "AWS::AutoScaling::AutoScalingGroup":
            resource["Metadata"]["neuronkit"]["pool"] = "ghost"
    (folder / "old-training.template.json").write_text(json.dumps(stale))
    assert "ghost" not in summarize(folder)


def test_alarms_are_counted_and_named(synth: Synth, tmp_path: Path) -> None:
    folder = tmp_path / "cdk.out"
    shutil.copytree(synth.outdir, folder)
    template = json.loads((folder / "prod-training.template.json").read_text())
    template["Resources"]["IdleAlarm0123ABCD"] = {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": "prod-pretrain-idle",
            "Namespace": "AWS/Neuron",
            "MetricName": "NeuronCoreUtilization",
            "ComparisonOperator": "LessThanThreshold",
            "Threshold": 5,
            "EvaluationPeriods": 3,
        },
    }
    (folder / "prod-training.template.json").write_text(json.dumps(template))
    # The monitoring stacks carry the environments' own alarms: the added one comes on top of them.
    before = int(re.search(r"(\d+) alarm\(s\)\.", summarize(synth.outdir).splitlines()[2]).group(1))  # type: ignore[union-attr]
    text = summarize(folder)
    assert f"{before + 1} alarm(s)." in text.splitlines()[2]
    assert _row(text, "prod-training", "prod-pretrain-idle") == [
        "prod-training",
        "prod-pretrain-idle",
        "AWS/Neuron NeuronCoreUtilization LessThan 5",
    ]
    (stack_row,) = [line for line in text.splitlines() if re.match(r"^\| prod-training \| \d+ \|", line)]
    assert "1 alarm(s)" in stack_row.split("|")[3]


def test_command_prints_and_writes_markdown(synth: Synth, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(synth.outdir)]) == 0
    assert capsys.readouterr().out == summarize(synth.outdir)
    out = tmp_path / "summary.md"
    assert main(["summary", str(synth.outdir), "-o", str(out)]) == 0
    markdown = summarize(synth.outdir)
    assert out.read_text() == markdown == capsys.readouterr().out  # -o also writes it (the grammar's output rule)


def test_command_explains_a_missing_synth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(tmp_path / "cdk.out")]) == 2
    err = capsys.readouterr().err
    assert "no cloud assembly here" in err and "make synth" in err and "Traceback" not in err


def test_each_pool_lists_its_neuron_release_and_pinned_ami(markdown: str) -> None:
    # An AMI bump or a release change is a visible line in a pull request.
    row = next(line for line in markdown.splitlines() if line.startswith("| pretrain | launch template | prod-training |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:7] == ["trn2.48xlarge", "2.28.1", "pytorch-training", "2.26.10.0"]
    assert cells[7].startswith("`ami-") and cells[8] == "cdk.context.json"
    batch = next(line for line in markdown.splitlines() if line.startswith("| batch | compute environment | dev-training |"))
    assert "2.28.1" in batch and "floating" not in batch
    chat = next(line for line in markdown.splitlines() if line.startswith("| chat | launch template | prod-inference | inf2"))
    assert "| 2.28.1 | vllm-serving | 2.26.10.0 |" in chat
    assert "boots a floating AMI" not in markdown  # no pool of the examples boots a floating AMI


def test_trainium_settings_show_lnc_and_the_capacity_block(markdown: str) -> None:
    from neuronkit.config import CapacityBlock, load_environment

    cap = load_environment(ROOT / "environments" / "prod.yaml").training[0].capacity
    assert isinstance(cap, CapacityBlock)
    row = _row(markdown, "pretrain", "2")
    assert row[2:4] == ["–", "capacity-block"]
    assert row[4:6] == [cap.start.strftime("%Y-%m-%dT%H:%M:%SZ"), cap.end.strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert row[7] == f"${cap.upfront_fee_usd:,.0f}"


# --------------------------------------------------------------------------------------------
# the summary's total and validate's reconcile by the named fixed charges (issue 50)
# --------------------------------------------------------------------------------------------
def _section(markdown: str, env: str) -> str:
    start = markdown.index(f"\n### {env}: ")
    end = markdown.find("\n### ", start + 1)
    return markdown[start : end if end >= 0 else None]


def _dollars(text: str) -> float:
    return float(text.strip().strip("*$").replace(",", ""))


def test_the_summary_total_and_validates_differ_by_the_named_fixed_charges(
    project_markdown: str, views: dict[str, EnvironmentView], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from neuronkit.reports.summary import fixed_charges_in
    from tests.project import sources

    envs = project_environments()
    assert envs and set(envs) <= set(views)
    assert any(e.platform == "eks" for e in envs.values())  # the EKS control plane and system nodes are reconciled too
    for name, env in envs.items():
        section = _section(project_markdown, name)
        (total,) = [line for line in section.splitlines() if line.startswith("| **total** |")]
        summary_total = dict(zip(cost.LEVELS, (_dollars(c) for c in total.strip("|").split("|")[3:]), strict=True))
        check = cost.budget_check(env)
        assert check.fixed, f"{name} has fixed charges"
        for level in cost.LEVELS:
            assert check.totals[level] - summary_total[level] == pytest.approx(sum(f.monthly for f in check.fixed), abs=0.01)
        # the summary names the kinds it leaves out, validate the charges it adds: the same kinds
        assert {kind for kind, _ in fixed_charges_in(views[name])} == {f.kind for f in check.fixed}
        assert "The total is the pools alone. It leaves out the fixed charges" in section
        # validate's ok line names what its total includes, each charge with its amount
        if env.budget is not None and env.budget.enforce != "off":
            (text,) = [t for f, t in sources().items() if f == f"{name}.yaml"]
            path = tmp_path / f"{name}.yaml"
            path.write_text(text)
            assert main(["validate", "--file", str(path)]) == 0
            out = capsys.readouterr().out
            level = env.budget.enforce
            pools = check.totals[level] - sum(f.monthly for f in check.fixed)
            assert f"{level} = pools {cost.usd(pools)} + fixed charges" in out
            assert all(f"{f.item} {cost.usd(f.monthly)}" in out for f in check.fixed)
            assert cost.usd(pools) == cost.usd(summary_total[level])  # the summary's total is validate's pools


def test_the_eks_fixed_charges_are_found_in_the_templates() -> None:
    """On EKS the control plane and the system node group are fixed charges too (hand-made templates)."""
    from neuronkit.rehearsal import StackInfo
    from neuronkit.reports.summary import fixed_charges_in

    resources = {
        "Cluster": {"Type": "AWS::EKS::Cluster", "Properties": {}},
        "System": {"Type": "AWS::EKS::Nodegroup", "Properties": {}},
        "Chat": {"Type": "AWS::EKS::Nodegroup", "Metadata": {"neuronkit": {"pool": "chat"}}, "Properties": {}},
        "Nat": {"Type": "AWS::EC2::NatGateway", "Properties": {}},
        "Alb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "application"}},
        "S3": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcEndpointType": "Gateway"}},
    }
    stack = StackInfo("mlp-eks", "mlp-eks", "aws://111111111111/us-west-2", "111111111111", "us-west-2", {"Resources": resources})
    view = EnvironmentView("mlp", "111111111111", "us-west-2", stacks=[stack])
    found = dict(fixed_charges_in(view))
    assert found == {
        "EKS control plane": "the EKS control plane", "EKS system nodes": "the EKS system node group",
        "NAT gateways": "NAT gateways x1", "load balancers": "1 ALB",
    }  # fmt: skip
    env = project_environments().get("mlp") or config_of("mlp")
    kinds = {f.kind for f in cost.fixed_costs(env)} - {"interface endpoints"}
    assert kinds == set(found)


def config_of(name: str):  # type: ignore[no-untyped-def]
    from neuronkit.config import load_environment

    return load_environment(ROOT / "tests" / "fixtures" / "user_environments" / f"{name}.yaml")


# --------------------------------------------------------------------------------------------
# which serving line each Neuron pool is on, and what ends when (issue 50)
# --------------------------------------------------------------------------------------------
def test_summary_and_validate_name_each_serving_pools_line(
    project_markdown: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from neuronkit.catalog import fit
    from neuronkit.config import neuron_warnings
    from tests.project import sources

    checked, ending = 0, 0
    for name, env in project_environments().items():
        section = _section(project_markdown, name)
        for i, f in enumerate(env.inference):
            if f.workload != "vllm-serving":
                continue
            for t in f.neuron_types:
                line = fit.line_of(t)
                assert line is not None, t
                (row,) = [r for r in section.splitlines() if r.startswith(f"| {f.name} | ") and f"| {line.title} |" in r]
                assert t in row and line.short()[len(line.title) + 2 : -1] in row and line.ends in row
                checked += 1
                warnings = [w for w in neuron_warnings(env) if w.startswith(f"inference[{i}].neuron_types[")]
                if line.ending:
                    ending += 1
                    assert line.last_release and any(line.last_release in w and line.ends in w for w in warnings)
                    assert f"**Warning:** {f.name} (" in section
                else:
                    assert not any(t in w for w in warnings)
        lines = config_lines(env)
        if lines:
            (text,) = [t for fn, t in sources().items() if fn == f"{name}.yaml"]
            path = tmp_path / f"{name}.yaml"
            path.write_text(text)
            assert main(["validate", "--file", str(path)]) == 0
            out = capsys.readouterr().out
            assert all(f"{fleet} on {line}" in out for fleet, line in lines.items())
    assert checked and ending  # the examples serve on Inf2 (in maintenance): the warning is exercised


def config_lines(env):  # type: ignore[no-untyped-def]
    from neuronkit.config import serving_lines

    return serving_lines(env)


def test_the_forward_line_has_no_warning_and_the_maintenance_line_names_its_last_release() -> None:
    from neuronkit.catalog import fit, serving

    engines = serving.facts()["engines"]
    assert fit.line_warning("trn2.48xlarge") is None and fit.line_of("trn2.48xlarge").name == "vllm-neuron"  # type: ignore[union-attr]
    warning = fit.line_warning("inf2.48xlarge")
    assert warning is not None and f"last release {engines['nxdi-vllm']['last_release']}" in warning
    assert "plan the move to vLLM Neuron plugin" in warning and "[maint-nxdi-2.31]" in warning
