"""Checks against a real AWS account (``preflight``): read-only calls made before a deploy, never at synth."""
