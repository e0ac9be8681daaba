"""The environment file: a typed, validated description of one neuronkit environment.

``environments/<name>.yaml`` is parsed into frozen pydantic models. Every check that can be made
without AWS runs here (instance types, AZ-ID offerings and AMI support come from the catalog), and
every problem is reported as one line naming the file, the key path and the fix, e.g.::

    environments/prod.yaml: training[0].instance_type: 'trn9.big' is not a known instance type; ...

``load_environment`` raises :class:`ConfigError` holding all problems of a file at once.

One module per section, each holding the section's models and its rules side by side:
``network``, ``storage``, ``training`` (clusters, capacity, AMIs, GPU pools, Batch), ``inference``,
``monitoring`` (alarms, day/night, budget); ``environment`` holds the top-level model and the checks
that span sections; ``errors`` turns pydantic's errors into the kit's lines; ``loader`` reads files.
"""

from neuronkit.config.base import (
    ACCOUNT_RE,
    AZ_ID_RE,
    CRON_RE,
    DEFAULT_INTERFACE_ENDPOINTS,
    LOG_RETENTION_DAYS,
    LUSTRE_THROUGHPUT,
    NAME_RE,
    REGION_RE,
    RESERVATION_RE,
    SERVE_COMMAND_MAX,
    ConfigError,
    Strict,
)
from neuronkit.config.environment import Environment, json_schema, neuron_warnings, pool_releases, serving_lines
from neuronkit.config.inference import HealthCheck, InferenceFleet, ScheduledCapacity, Serve
from neuronkit.config.loader import environment_files, load_all, load_environment, parse_environment
from neuronkit.config.monitoring import Alarms, Budget, DayNight, Monitoring
from neuronkit.config.network import ExistingVpc, Network
from neuronkit.config.neuron import PoolRelease, Workload
from neuronkit.config.pilot import Pilot
from neuronkit.config.storage import Lustre, Storage
from neuronkit.config.training import (
    Ami,
    Capacity,
    CapacityBlock,
    GpuPool,
    Odcr,
    OnDemand,
    TrainingCluster,
    ami_family,
    block_problems,
    gpu_ami_family,
)

__all__ = [
    "ACCOUNT_RE", "AZ_ID_RE", "CRON_RE", "DEFAULT_INTERFACE_ENDPOINTS", "LOG_RETENTION_DAYS", "LUSTRE_THROUGHPUT",
    "NAME_RE", "REGION_RE", "RESERVATION_RE", "SERVE_COMMAND_MAX", "Alarms", "Ami", "Budget", "Capacity",
    "CapacityBlock", "ConfigError", "DayNight", "Environment", "ExistingVpc", "GpuPool", "HealthCheck",
    "InferenceFleet", "Lustre", "Monitoring", "Network", "OnDemand", "Odcr", "Pilot", "ScheduledCapacity", "Serve",
    "Storage", "Strict", "TrainingCluster", "ami_family", "block_problems", "environment_files", "gpu_ami_family", "json_schema",
    "load_all", "load_environment", "parse_environment", "neuron_warnings", "pool_releases", "serving_lines", "PoolRelease", "Workload",
]  # fmt: skip
