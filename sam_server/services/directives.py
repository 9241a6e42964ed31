"""The sbatch-like keys of a job spec: `array`, `dependency`, `hold`, `kill_invalid_depend`.

They say how a job is queued, not what it computes, so they are taken out of the spec before
it is validated (and never reach the compiler or the compile hash); `sam submit --array ...`
and the other flags set the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from sam_server.errors import InvalidSpec
from sam_server.services.arrays import MAX_ARRAY_INDEX, parse_array
from sam_server.services.auth import Principal
from sam_server.services.dependencies import check_targets, parse_dependency

DIRECTIVE_KEYS = ("array", "dependency", "hold", "kill_invalid_depend")


@dataclass(frozen=True)
class Directives:
    array: str | None = None
    dependency: str | None = None  # normalized text, e.g. "afterok:j1:j2,singleton"
    hold: bool = False
    kill_invalid_depend: bool = False

    def columns(self) -> dict[str, object]:
        """The job row's values for these keys."""
        return {
            "hold": "user" if self.hold else None,
            "dependency": self.dependency,
            "kill_invalid_depend": self.kill_invalid_depend,
        }


def _flag(raw: Mapping[str, object], key: str) -> bool:
    value = raw.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        message = f"{key} must be true or false, not {value!r}"
        raise InvalidSpec(message, errors=[{"field": f"spec.{key}", "message": message}])
    return value


def _text(raw: Mapping[str, object], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool) or not str(value).strip():
        message = f"{key} must be a non-empty string such as {'0-99%10' if key == 'array' else 'afterok:ID'}"
        raise InvalidSpec(message, errors=[{"field": f"spec.{key}", "message": message}])
    return str(value).strip()


def split_directives(raw: Mapping[str, object]) -> tuple[dict[str, Any], Directives]:
    """(the spec without the sbatch-like keys, those keys checked for form)."""
    rest = {k: v for k, v in raw.items() if k not in DIRECTIVE_KEYS}
    array = _text(raw, "array")
    if array is not None:  # the form here; the size against max_array_tasks at submit
        parse_array(array, max_tasks=MAX_ARRAY_INDEX + 1)
    dependency = _text(raw, "dependency")
    if dependency is not None:
        dependency = ",".join(c.text() for c in parse_dependency(dependency))
        if len(dependency) > 1024:
            message = "the dependency text is over 1024 characters; chain fewer jobs per condition"
            raise InvalidSpec(message, errors=[{"field": "spec.dependency", "message": message}])
    directives = Directives(
        array=array,
        dependency=dependency,
        hold=_flag(raw, "hold"),
        kill_invalid_depend=_flag(raw, "kill_invalid_depend"),
    )
    return rest, directives


def check_directives(session: Session, principal: Principal, directives: Directives) -> None:
    """The jobs a dependency names exist in the submitter's tenant."""
    if directives.dependency:
        check_targets(
            session, parse_dependency(directives.dependency), tenant_id=principal.tenant_id
        )
