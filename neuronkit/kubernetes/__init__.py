"""What runs on the nodes of a ``platform: eks`` cluster, as data: Helm values and Kubernetes manifests.

One module per workload kind, each a set of small functions from the kit's config and catalog to plain dicts
(no CDK here, so the values and manifests are tested and schema-checked on their own):

- :mod:`neuronkit.kubernetes.neuron_chart`: the Neuron Helm chart (device plugin or DRA driver, node problem
  detector with node recovery), its pinned version per Neuron release, and the DRA refusals;
- :mod:`neuronkit.kubernetes.efa_chart`: the EFA device plugin chart;
- :mod:`neuronkit.kubernetes.lustre`: the static PersistentVolume and claim of the environment's FSx for Lustre.

The CDK side (HelmChart, KubernetesManifest, pod identity) is ``neuronkit/constructs/eks/workloads.py``.
"""
