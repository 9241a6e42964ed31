"""Plugin arguments from the settings: names checked by `Profile.with_args`, values by the
arguments' own dataclass field types (a string where a number belongs is an error that names
the plugin and the field)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from sam_server.scheduling.framework.profile import CYCLE, Profile, ProfileError
from sam_server.scheduling.profiles import profile_named

A = TypeVar("A")


def profile_from_settings(
    name: str, cycle: Mapping[str, object], changes: Mapping[str, Mapping[str, object]]
) -> Profile:
    """Profile `name` with the `cycle` arguments and then `changes` applied, every value checked
    against its field's type."""
    merged: dict[str, Mapping[str, object]] = dict(changes)
    merged[CYCLE] = {**cycle, **changes.get(CYCLE, {})}
    profile = profile_named(name, merged)
    plugins = tuple(
        dataclasses.replace(p, args=_checked(p.args, p.name))  # type: ignore[type-var]
        for p in profile.plugins
    )
    return Profile(profile.name, plugins, _checked(profile.cycle, CYCLE))


def _checked(args: A, owner: str) -> A:
    try:
        return TypeAdapter(type(args)).validate_python(dataclasses.asdict(args))  # type: ignore[call-overload]
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ProfileError(f"scheduler plugin {owner!r}: {problems}") from None
