"""A profile: the framework's own arguments and an ordered list of plugins with theirs.

`profiles.py` names the built-in profiles (`default`, `easy`, `fcfs`); a deployment picks one
by name (`SAM_SCHEDULER_PROFILE`, `sam sim --profile`) and may change any plugin's arguments
(`Profile.with_args`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from sam_server.scheduling.framework.points import (
    POINTS,
    Filter,
    Plugin,
    PostFilter,
    QueueSort,
    Reserve,
    Score,
    WalkOrder,
)

P = TypeVar("P", bound=Plugin)

CYCLE = "cycle"
"""The name under which `Profile.with_args` changes the framework's own `CycleArgs`."""


@dataclass(frozen=True)
class CycleArgs:
    """Arguments every plugin of a profile shares (the framework's own).

    - flexible: a job with alternative shapes may take any of them (False: only its asked one).
    - reserve_after_s: only a job eligible this long is put first as the oldest, reserves,
      migrates or drains (as Slurm's bf_min_age_reserve); 0: the first blocked job reserves.
    - min_run_before_preempt_s: a job runs this long after its (re)start before it may be
      stopped or moved, and is not put first in the walk for this long after a stop.
    - max_preemptions_per_job: stops and moves one job may suffer in all.
    - eta_depth: ETAs are estimated for this many jobs at the head of the queue (others none).
    """

    flexible: bool = True
    reserve_after_s: float = 600.0
    min_run_before_preempt_s: float = 600.0
    max_preemptions_per_job: int = 3
    eta_depth: int = 100_000


class ProfileError(ValueError):
    """A profile that cannot run, or a change of arguments no plugin of it takes."""


@dataclass(frozen=True)
class Profile:
    """A named, ordered list of plugins (each with its typed arguments) and the `CycleArgs`."""

    name: str
    plugins: tuple[Plugin, ...]
    cycle: CycleArgs = field(default_factory=CycleArgs)

    def __post_init__(self) -> None:
        names = [p.name for p in self.plugins]
        if len(set(names)) < len(names):
            raise ProfileError(f"profile {self.name!r}: a plugin is listed twice: {names}")
        for plugin in self.plugins:
            if not isinstance(plugin, POINTS):
                raise ProfileError(f"profile {self.name!r}: {plugin!r} is at no extension point")
        for point in (QueueSort, Score, Reserve):
            found = [p.name for p in self.plugins if isinstance(p, point)]
            if len(found) != 1:
                raise ProfileError(
                    f"profile {self.name!r} needs exactly one {point.__name__} plugin, has "
                    f"{found or 'none'}"
                )

    def at(self, point: type[P]) -> list[P]:
        """The profile's plugins at one extension point, in profile order."""
        return [p for p in self.plugins if isinstance(p, point)]

    def one(self, point: type[P]) -> P:
        """The plugin at a point that takes exactly one (QueueSort, Score, Reserve)."""
        return self.at(point)[0]

    def find(self, name: str) -> Plugin | None:
        """The plugin of that name, if the profile has it."""
        return next((p for p in self.plugins if p.name == name), None)

    @property
    def queue_sort(self) -> QueueSort:
        return self.one(QueueSort)

    @property
    def walk_orders(self) -> list[WalkOrder]:
        return self.at(WalkOrder)

    @property
    def filters(self) -> list[Filter]:
        return self.at(Filter)

    @property
    def score(self) -> Score:
        return self.one(Score)

    @property
    def post_filters(self) -> list[PostFilter]:
        return self.at(PostFilter)

    @property
    def reserve(self) -> Reserve:
        return self.one(Reserve)

    def with_args(self, changes: Mapping[str, Mapping[str, object]]) -> Profile:
        """This profile with arguments changed: {plugin name or "cycle": {field: value}}.

        An unknown plugin or field is an error that names the ones there are. Values are taken
        as given (`settings.plugin_args` validates them against the fields' types)."""
        cycle = self.cycle
        plugins = list(self.plugins)
        for name, fields in changes.items():
            if name == CYCLE:
                cycle = _replace(cycle, fields, CYCLE)
                continue
            at = next((k for k, p in enumerate(plugins) if p.name == name), None)
            if at is None:
                known = ", ".join([CYCLE, *(p.name for p in plugins)])
                raise ProfileError(
                    f"profile {self.name!r} has no plugin {name!r} (it has: {known})"
                )
            plugin = plugins[at]
            new_args = _replace(plugin.args, fields, name)
            plugins[at] = dataclasses.replace(plugin, args=new_args)  # type: ignore[type-var]
        return Profile(self.name, tuple(plugins), cycle)


A = TypeVar("A")


def _replace(args: A, fields: Mapping[str, object], owner: str) -> A:
    known = {f.name for f in dataclasses.fields(args)}  # type: ignore[arg-type]
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ProfileError(
            f"{owner} has no argument {', '.join(unknown)} (it has: {', '.join(sorted(known))})"
        )
    return dataclasses.replace(args, **fields)  # type: ignore[type-var]
