"""Compile errors a user can act on.

Every failure of `compiler.compile_job` raises a `CompileError` subclass. `.kind` is the job's
`error.kind` (CONTRACT section 2), `.message` says what to do next and `.details` is JSON-able
(the list of unsupported ops, the memory breakdown, the traceback of a model that raised).
"""

from __future__ import annotations

from typing import Any


class CompileError(Exception):
    """A compile failed; the message tells the user what to change."""

    kind = "internal"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_dict(self) -> dict[str, Any]:
        """`{kind, message, details}`, JSON-able, as a worker stores it."""
        return {"kind": self.kind, "message": self.message, "details": self.details}


class ModelError(CompileError):
    """The user's model or data code raised, ran too long or used too much memory."""

    kind = "model_error"


class UnsupportedOperator(CompileError):
    """The training step uses operators the wafer has no kernel for (all are listed)."""

    kind = "unsupported_op"


class CompileOOM(CompileError):
    """A kernel needs more SRAM per PE than the architecture has in this region."""

    kind = "compile_oom"


class InvalidSpec(CompileError):
    """The job spec or its files are inconsistent (e.g. a missing file or class)."""

    kind = "invalid_spec"


class ArtifactCorrupt(CompileError):
    """An artifact's files do not match their recorded hashes (changed after it was written)."""

    kind = "artifact_corrupt"


class InternalCompileError(CompileError):
    """A compiler bug; please report it with the job spec."""

    kind = "internal"


_BY_KIND = {
    c.kind: c for c in (ModelError, UnsupportedOperator, CompileOOM, InvalidSpec, ArtifactCorrupt)
}


def error_from_dict(data: dict[str, Any]) -> CompileError:
    """Rebuild a `CompileError` from `to_dict()` output (errors cross the sandbox as JSON)."""
    cls = _BY_KIND.get(str(data.get("kind")), InternalCompileError)
    return cls(str(data.get("message", "compile failed")), dict(data.get("details") or {}))
