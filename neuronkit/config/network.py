"""network: the VPC layout (subnets placed by AZ ID) and its rules."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, model_validator

from neuronkit.config.base import AZ_ID_RE, DEFAULT_INTERFACE_ENDPOINTS, Strict, _raise_all


class ExistingVpc(Strict):
    """An existing VPC to deploy into instead of creating one."""

    vpc_id: Annotated[str, Field(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    subnet_ids: dict[Annotated[str, Field(pattern=AZ_ID_RE)], Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        description="Private subnet for each AZ ID the environment uses."
    )


class Network(Strict):
    """VPC layout. Subnets are placed by AZ ID, never by AZ name."""

    az_ids: list[Annotated[str, Field(pattern=AZ_ID_RE)]] = Field(
        min_length=1, description="AZ IDs (e.g. use1-az6) to create subnets in."
    )
    cidr: str = Field(default="10.0.0.0/16", description="VPC CIDR block (a /16 to /20).")
    nat_gateways: int = Field(default=1, ge=0, description="NAT gateways for outbound internet (pip, registries). 0 = isolated.")
    private_subnet_prefix: int | None = Field(
        default=None,
        ge=16,
        le=28,
        description=(
            "Prefix of the private subnets (one per AZ ID). Default: the largest the cidr holds beside the public "
            "/26 subnets (a /16 with 2 AZ IDs: /18), which no pool size changes. Set it to keep the subnets of an "
            "environment deployed with neuronkit 0.1, which sized them from the pools (often /24): docs/network.md."
        ),
    )
    interface_endpoints: list[str] = Field(default=list(DEFAULT_INTERFACE_ENDPOINTS))
    flow_log_retention_days: int = Field(default=90, ge=1)
    existing: ExistingVpc | None = None

    @model_validator(mode="after")
    def _check(self) -> Network:
        problems: list[tuple[str, str]] = []
        for i, az in enumerate(self.az_ids):
            if az in self.az_ids[:i]:
                problems.append((f"az_ids[{i}]", f"'{az}' is listed twice; AZ IDs must be unique, remove one"))
        try:
            net = ipaddress.ip_network(self.cidr)
        except ValueError:
            problems.append(("cidr", f"'{self.cidr}' is not a CIDR block; use e.g. 10.0.0.0/16"))
        else:
            if not 16 <= net.prefixlen <= 20:
                problems.append(("cidr", f"'{self.cidr}' must be a /16 to /20 block, e.g. 10.0.0.0/16"))
        if self.nat_gateways > len(self.az_ids):
            problems.append(("nat_gateways", f"{self.nat_gateways} is more than one per AZ ID ({len(self.az_ids)}); lower it"))
        if self.existing is not None:
            missing = [a for a in self.az_ids if a not in self.existing.subnet_ids]
            if missing:
                problems.append(
                    ("existing.subnet_ids", f"no subnet for AZ ID(s) {', '.join(missing)}; add one per entry of network.az_ids")
                )
        _raise_all(problems)
        return self
