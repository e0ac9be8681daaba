"""The adoption path from GPUs to Neuron: ``assess`` (what moving would save), ``pilot`` (the same job on
both sides, measured) and ``pilot_metrics`` (the one file a pilot job imports to report its steps).
"""
