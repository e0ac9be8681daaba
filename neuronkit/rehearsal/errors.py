"""The rehearsal's one error type, shared by every module of :mod:`neuronkit.rehearsal`."""

from __future__ import annotations

from collections.abc import Sequence


class RehearsalError(Exception):
    """The rehearsal failed; ``tail`` holds the CDK CLI's last lines when the CLI failed.

    ``code`` is the exit code for ``neuronkit rehearse``: 1 when a deployment or a check failed, 2 when
    the rehearsal refused to start (unsafe endpoint, missing tool).
    """

    def __init__(self, message: str, *, code: int = 1, tail: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.tail = list(tail)

    def __str__(self) -> str:
        if not self.tail:
            return self.message
        return self.message + "\n" + "\n".join(f"    {line}" for line in self.tail)
