"""The CLI's user-facing failure, in a module of its own so that the subcommand modules and ``neuronkit.cli`` (which
re-exports it) do not import each other."""

from __future__ import annotations


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code
