"""A fleet's serving spec from its entry in the environment file: the one both platforms' stacks serve from
(``InferenceStack`` on the Auto Scaling path, ``EksStack`` on EKS), so their profiles cannot drift apart."""

from __future__ import annotations

from neuronkit.catalog import serving
from neuronkit.config import Environment, pool_releases
from neuronkit.config import InferenceFleet as FleetConfig
from neuronkit.config.inference import model_spec
from neuronkit.constructs.serving_specs import ServingSpec


def serving_spec(config: Environment, f: FleetConfig, name: str) -> ServingSpec | None:
    model = model_spec(f)
    if model is None:
        return None
    pool = pool_releases(config).get(name)
    return ServingSpec(
        model=model,
        neuron_release=pool.release if pool else None,
        profiles={
            t: serving.ProfileOverride(
                tensor_parallel=o.tensor_parallel, max_model_len=o.max_model_len, max_num_seqs=o.max_num_seqs
            )
            for t, o in f.profiles.items()
        },
        registry=None if f.images.registry == "pull-through" else f.images.registry,
        neuron_image=f.images.neuron,
        gpu_image=f.images.gpu,
        precompile=f.precompile,
        lnc=f.lnc,
    )
