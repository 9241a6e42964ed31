"""Domain errors. Services raise them; the API renders each once as RFC 9457 problem+json.

The docstring of each class is its title; the message tells the user what to do next.
"""

from __future__ import annotations

from typing import Any


class SamError(Exception):
    """SAM error"""

    status = 500
    type_slug = "internal"

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors

    @property
    def title(self) -> str:
        return (self.__doc__ or self.__class__.__name__).strip().splitlines()[0]


class ConfigError(SamError):
    """Invalid configuration"""

    type_slug = "config"


class Unauthorized(SamError):
    """Not authenticated"""

    status = 401
    type_slug = "unauthorized"


class Forbidden(SamError):
    """Not allowed"""

    status = 403
    type_slug = "forbidden"


class NotFound(SamError):
    """Not found"""

    status = 404
    type_slug = "not-found"


class JobNotFound(NotFound):
    """Job not found"""


class TenantNotFound(NotFound):
    """Tenant not found"""


class Conflict(SamError):
    """Conflict"""

    status = 409
    type_slug = "conflict"


class InvalidTransition(Conflict):
    """The job's state forbids this action"""


class AlreadyExists(Conflict):
    """Already exists"""


class PayloadTooLarge(SamError):
    """Request body too large"""

    status = 413
    type_slug = "payload-too-large"


class InvalidSpec(SamError):
    """Invalid job spec"""

    status = 422
    type_slug = "invalid-spec"


class NeverFits(SamError):
    """The job can never run"""

    status = 422
    type_slug = "never-fits"


class IdempotencyMismatch(SamError):
    """Idempotency-Key reused with another body"""

    status = 422
    type_slug = "idempotency-mismatch"


class QuotaExceeded(SamError):
    """Quota exceeded"""

    status = 429
    type_slug = "quota-exceeded"


class RateLimited(SamError):
    """Too many requests"""

    status = 429
    type_slug = "rate-limited"


class BadRequest(SamError):
    """Bad request"""

    status = 400
    type_slug = "bad-request"
