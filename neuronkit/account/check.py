"""One line of a preflight report, shared by the account checks (``neuronkit.account.preflight``) and the EKS checks
(``neuronkit.kubernetes.preflight``) so that neither imports the other's module for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["PASS", "WARN", "FAIL"]


@dataclass(frozen=True)
class Check:
    """One line of the preflight report."""

    status: Status
    name: str
    detail: str
    fix: str = ""
