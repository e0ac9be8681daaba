"""Reports over a synth or an environment file, for people reviewing a change.

``summary`` (the Markdown review of a synthesized app), ``review`` (what a change does against a git
revision), ``cost`` (pools priced against their GPU equivalents and the budget) and ``pools`` (the pool
metadata contract: constructs write it into the template, reports read it back).
"""
