"""Domain errors. Services raise them; the API renders each once as RFC 9457 problem+json.

The docstring of each class is its title; the message tells the user what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class SamError(Exception):
    """SAM error"""

    status = 500
    type_slug = "internal"

    def __init_subclass__(cls, *, status: int | None = None, slug: str | None = None) -> None:
        """`class X(SamError, status=422, slug="x")`: a subclass's HTTP status and type slug
        (each inherited when not given)."""
        super().__init_subclass__()
        if status is not None:
            cls.status = status
        if slug is not None:
            cls.type_slug = slug

    def __init__(
        self, detail: str, *, errors: Sequence[Mapping[str, object]] | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors

    @property
    def title(self) -> str:
        return (self.__doc__ or self.__class__.__name__).strip().splitlines()[0]


class ConfigError(SamError, slug="config"):
    """Invalid configuration"""


class Unauthorized(SamError, status=401, slug="unauthorized"):
    """Not authenticated"""


class Forbidden(SamError, status=403, slug="forbidden"):
    """Not allowed"""


class NotFound(SamError, status=404, slug="not-found"):
    """Not found"""


class JobNotFound(NotFound):
    """Job not found"""


class TenantNotFound(NotFound):
    """Tenant not found"""


class Conflict(SamError, status=409, slug="conflict"):
    """Conflict"""


class InvalidTransition(Conflict):
    """The job's state forbids this action"""


class AlreadyExists(Conflict):
    """Already exists"""


class PayloadTooLarge(SamError, status=413, slug="payload-too-large"):
    """Request body too large"""


class InvalidSpec(SamError, status=422, slug="invalid-spec"):
    """Invalid job spec"""


class NeverFits(SamError, status=422, slug="never-fits"):
    """The job can never run"""


class IdempotencyMismatch(SamError, status=422, slug="idempotency-mismatch"):
    """Idempotency-Key reused with another body"""


class QuotaExceeded(SamError, status=429, slug="quota-exceeded"):
    """Quota exceeded"""


class RateLimited(SamError, status=429, slug="rate-limited"):
    """Too many requests"""


class BadRequest(SamError, status=400, slug="bad-request"):
    """Bad request"""
