"""storage: buckets and the optional FSx for Lustre file system, with their rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from neuronkit.config.base import AZ_ID_RE, LUSTRE_THROUGHPUT, Strict, _raise_all


class Lustre(Strict):
    """FSx for Lustre 2.15 scratch or persistent file system."""

    deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "SCRATCH_2"
    size_gib: int = Field(default=1200, description="1200, 2400, then steps of 2400 GiB.")
    throughput_mbps_per_tib: int | None = Field(default=None, description="PERSISTENT_2 only: 125, 250, 500 or 1000.")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] | None = Field(
        default=None, description="Defaults to the first training cluster's AZ ID."
    )
    link_checkpoints: bool = Field(
        default=True,
        description="Also link the checkpoints bucket at /checkpoints, with automatic export to S3 "
        "(Lustre 2.15 SCRATCH_2 and PERSISTENT_2 both take up to 8 associations).",
    )

    @model_validator(mode="after")
    def _check(self) -> Lustre:
        problems: list[tuple[str, str]] = []
        size, kind, tput = self.size_gib, self.deployment_type, self.throughput_mbps_per_tib
        if size not in (1200, 2400) and not (size > 2400 and size % 2400 == 0):
            below, above = (1200, 2400) if size < 2400 else (size // 2400 * 2400, size // 2400 * 2400 + 2400)
            problems.append(
                ("size_gib", f"{size} is not valid for {kind}; use 1200, 2400 or a multiple of 2400 (e.g. {below} or {above})")
            )
        allowed = LUSTRE_THROUGHPUT.get(kind)
        choices = ", ".join(map(str, allowed or ()))
        if allowed is None and tput is not None:
            problems.append(
                ("throughput_mbps_per_tib", f"{kind} has a fixed throughput (200 MB/s/TiB); remove the key or use PERSISTENT_2")
            )
        elif allowed is not None and tput is None:
            problems.append(("throughput_mbps_per_tib", f"required for {kind}; use one of {choices}"))
        elif allowed is not None and tput not in allowed:
            problems.append(("throughput_mbps_per_tib", f"{tput} is not valid for {kind}; use one of {choices}"))
        _raise_all(problems)
        return self


class Storage(Strict):
    """Buckets (datasets, checkpoints, artifacts) and an optional Lustre file system."""

    lustre: Lustre | None = None
    checkpoint_noncurrent_days: int = Field(default=30, ge=1, description="Keep old checkpoint versions this many days.")
    datasets_versioned: bool = Field(
        default=True,
        description="Version the datasets bucket (overwritten or deleted training data can be recovered); "
        "false for very large data you can regenerate.",
    )


def bucket_names(environment: str, account: str | None, region: str | None) -> dict[str, str]:
    """An environment's deterministic bucket names (globally unique through account and region; at most 63 chars):
    the storage stack creates them, and the pools and the job renderer name them without a CDK import."""
    return {p: f"{environment}-{p}-{account}-{region}" for p in ("datasets", "checkpoints", "artifacts")}
