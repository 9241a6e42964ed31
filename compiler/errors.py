"""Compile errors a user can act on.

Every failure of `compiler.compile_job` raises a `CompileError` subclass. `.kind` is the job's
`error.kind` (docs/contract.md section 2), `.message` says what to do next and `.details` is JSON-able
(the list of unsupported ops, the memory breakdown, the traceback of a model that raised).
"""

from __future__ import annotations

from typing import Any

_BY_KIND: dict[str, type[CompileError]] = {}
"""Each subclass by its kind (error_from_dict's table); filled as the subclasses are defined."""


class CompileError(Exception):
    """A compile failed; the message tells the user what to change."""

    kind = "internal"

    def __init_subclass__(cls, kind: str | None = None, **kwargs: Any) -> None:
        """`class X(CompileError, kind="..."):` names the kind and makes `error_from_dict`
        rebuild an X from it; a subclass without one keeps its parent's kind."""
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind
            _BY_KIND[kind] = cls

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, object] = details or {}

    def to_dict(self) -> dict[str, object]:
        """`{kind, message, details}`, JSON-able, as a worker stores it."""
        return {"kind": self.kind, "message": self.message, "details": self.details}


class ModelError(CompileError, kind="model_error"):
    """The user's model or data code raised, ran too long or used too much memory."""


class UnsupportedOperator(CompileError, kind="unsupported_op"):
    """The training step uses operators the wafer has no kernel for (all are listed)."""


class CompileOOM(CompileError, kind="compile_oom"):
    """A kernel needs more SRAM per PE than the architecture has in this region."""


class InvalidSpec(CompileError, kind="invalid_spec"):
    """The job spec or its files are inconsistent (e.g. a missing file or class)."""


class ArtifactCorrupt(CompileError, kind="artifact_corrupt"):
    """An artifact's files do not match their recorded hashes (changed after it was written)."""


class ArtifactInvalid(CompileError, kind="artifact_invalid"):
    """An artifact's graph or plan does not hold up when the trusted side re-derives it (an op's
    output shape or dtype, a kernel's rectangle or SRAM): it was forged or miscompiled."""


class HostOOM(CompileError, kind="host_oom"):
    """Running the step would need more host memory than a wafer worker gives one job."""


class InternalCompileError(CompileError, kind="internal"):
    """A compiler bug; please report it with the job spec."""


def file_system_hint(exc: BaseException) -> str:
    """What to add to a user-code error that hit the sandbox's file system caps ("" otherwise):
    ENOSPC past /tmp's or /dev/shm's size, EROFS anywhere else."""
    if isinstance(exc, OSError) and exc.errno in (28, 30, 122):  # ENOSPC, EROFS, EDQUOT
        return (
            "; in the sandbox only /tmp and /dev/shm are writable, each a size-capped tmpfs "
            "(512 MiB and 64 MiB by default), and the rest of its file system is read-only: "
            "write less scratch data there"
        )
    return ""


def error_from_dict(data: dict[str, Any]) -> CompileError:
    """Rebuild a `CompileError` from `to_dict()` output (errors cross the sandbox as JSON)."""
    cls = _BY_KIND.get(str(data.get("kind")), InternalCompileError)
    return cls(str(data.get("message", "compile failed")), dict(data.get("details") or {}))
