"""The whole environment file: its top-level keys and the checks that span sections."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from neuronkit.config.base import ACCOUNT_RE, NAME_RE, REGION_RE, Strict, _foreign_az, _raise_all
from neuronkit.config.inference import InferenceFleet, _inference_problems
from neuronkit.config.monitoring import Budget, Monitoring, _day_night_problems
from neuronkit.config.network import Network
from neuronkit.config.storage import Storage
from neuronkit.config.training import TrainingCluster, _check_cluster


class Environment(Strict):
    """One neuronkit environment (one file under environments/)."""

    schema_: str | None = Field(default=None, alias="$schema", description="Editor hint; ignored.")
    name: Annotated[str, Field(pattern=NAME_RE)]
    account: Annotated[str, Field(pattern=ACCOUNT_RE, description="12-digit AWS account id.")]
    region: Annotated[str, Field(pattern=REGION_RE, description="AWS region, e.g. us-east-1.")]
    cost_center: str = "ml-platform"
    tags: dict[str, str] = Field(default_factory=dict)
    network: Network = Field(description="VPC layout with az_ids, e.g. az_ids: [use1-az6].")
    storage: Storage = Storage()
    training: list[TrainingCluster] = Field(default_factory=list)
    inference: list[InferenceFleet] = Field(default_factory=list)
    monitoring: Monitoring = Monitoring()
    budget: Budget | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _cross(self) -> Environment:
        problems = _cross_problems(self.region, self.network, self.storage, list(enumerate(self.training)))
        problems += _inference_problems(self.region, self.network, list(enumerate(self.inference)))
        problems += _day_night_problems(self.monitoring.day_night, self.training, self.inference)
        _raise_all(problems)
        return self

    @property
    def lustre_az_id(self) -> str | None:
        lustre = self.storage.lustre
        if lustre is None:
            return None
        if lustre.az_id:
            return lustre.az_id
        return self.training[0].az_id if self.training else self.network.az_ids[0]


def _cross_problems(
    region: str | None, network: Network | None, storage: Storage | None, clusters: list[tuple[int, TrainingCluster]]
) -> list[tuple[str, str]]:
    """Checks that span sections. Each argument is None (or a cluster missing from ``clusters``) when that
    part of the file failed its own validation; checks needing it are skipped, the others still run."""
    problems: list[tuple[str, str]] = []
    az_ids = network.az_ids if network is not None else None
    if region is not None and az_ids is not None:
        for i, az in enumerate(az_ids):
            foreign = _foreign_az(az, region)
            if foreign:
                problems.append((f"network.az_ids[{i}]", foreign))
    first: dict[str, int] = {}
    for i, cluster in clusters:
        if cluster.name in first:
            taken = f"'{cluster.name}' is already the name of training[{first[cluster.name]}]"
            problems.append((f"training[{i}].name", f"{taken}; give each cluster its own name"))
        first.setdefault(cluster.name, i)
        problems.extend(_check_cluster(f"training[{i}]", cluster, region, az_ids))
    lustre = storage.lustre if storage is not None else None
    if lustre is not None and lustre.az_id:
        foreign = _foreign_az(lustre.az_id, region) if region is not None else None
        if foreign:
            problems.append(("storage.lustre.az_id", foreign))
        elif az_ids is not None and lustre.az_id not in az_ids:
            fix = f"add it there or pick one of {', '.join(az_ids)}"
            problems.append(("storage.lustre.az_id", f"'{lustre.az_id}' is not in network.az_ids; {fix}"))
    return problems


def _valid(model: type[BaseModel], raw: Any) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _cross_problems_of_parts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The cross-section checks on every section that is valid on its own.

    Pydantic runs Environment's cross checks only when every field is valid, so a typo in one place
    would hide e.g. an unknown instance type in another; validating the sections one by one reports both.
    """
    region = data.get("region")
    region = region if isinstance(region, str) and re.match(REGION_RE, region) else None
    training = data.get("training", [])
    valid = [(i, _valid(TrainingCluster, raw)) for i, raw in enumerate(training if isinstance(training, list) else [])]
    clusters = [(i, c) for i, c in valid if c is not None]
    network = _valid(Network, data.get("network"))
    inference = data.get("inference", [])
    fleets = [(i, _valid(InferenceFleet, raw)) for i, raw in enumerate(inference if isinstance(inference, list) else [])]
    return _cross_problems(region, network, _valid(Storage, data.get("storage", {})), clusters) + _inference_problems(
        region, network, [(i, f) for i, f in fleets if f is not None]
    )


def json_schema() -> dict[str, Any]:
    schema = Environment.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "neuronkit environment"
    return schema
