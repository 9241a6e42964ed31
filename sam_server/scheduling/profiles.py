"""The built-in profiles, by name, and the profile a flat `PolicyConfig` stands for.

- `default`: SAM's policy. Priority order with the oldest jobs first, best-fit placement of
  flexible shapes (cut to fit, look-ahead), preemption and selective suspension, migration,
  drain stop, and reservations for the first two blocked jobs with backfill around them.
- `easy`: EASY backfill (the Slurm-like anchor): submit order, first fit, one reservation.
- `fcfs`: first come first served (the Cerebras anchor): `easy` without backfill.

A profile is chosen by name (`SAM_SCHEDULER_PROFILE`, `sam sim --profile`) and any plugin's
arguments changed with `Profile.with_args` (`SAM_SCHEDULER_PLUGIN_ARGS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sam_server.scheduling.framework.points import Plugin
from sam_server.scheduling.framework.profile import CycleArgs, Profile, ProfileError
from sam_server.scheduling.model import PolicyConfig
from sam_server.scheduling.plugins.arch import Arch
from sam_server.scheduling.plugins.drain import Drain, DrainArgs
from sam_server.scheduling.plugins.fifo_sort import FifoSort, FifoSortArgs
from sam_server.scheduling.plugins.first_after_stop import FirstAfterStop, FirstAfterStopArgs
from sam_server.scheduling.plugins.fit import Fit, FitArgs
from sam_server.scheduling.plugins.migrate import Migrate, MigrateArgs
from sam_server.scheduling.plugins.oldest_first import OldestFirst, OldestFirstArgs
from sam_server.scheduling.plugins.preempt import Preempt, PreemptArgs
from sam_server.scheduling.plugins.priority_sort import PriorityArgs, PrioritySort
from sam_server.scheduling.plugins.quota import Quota
from sam_server.scheduling.plugins.reserve import Backfill, ReserveArgs


def default_profile() -> Profile:
    """SAM's policy."""
    return Profile(
        "default",
        (
            PrioritySort(),
            OldestFirst(),
            FirstAfterStop(),
            Quota(),
            Arch(),
            Fit(),
            Preempt(),
            Migrate(),
            Drain(),
            Backfill(),
        ),
    )


def easy_profile() -> Profile:
    """EASY backfill in submit order with first-fit placement (the Slurm-like anchor)."""
    return Profile(
        "easy",
        (
            FifoSort(),
            FirstAfterStop(FirstAfterStopArgs(behind_factor=0.0)),
            Quota(),
            Arch(),
            Fit(FitArgs(placement="first_fit", cut_to_fit=False, lookahead=0)),
            Backfill(ReserveArgs(reservations=1, placement="first_fit", cut_reserve=False)),
        ),
        CycleArgs(flexible=False, reserve_after_s=0.0),
    )


def fcfs_profile() -> Profile:
    """First come first served with first-fit placement and no backfill (the Cerebras anchor)."""
    easy = easy_profile()
    return Profile("fcfs", easy.plugins, easy.cycle).with_args({"reserve": {"backfill": False}})


PROFILES: dict[str, Callable[[], Profile]] = {
    "default": default_profile,
    "easy": easy_profile,
    "fcfs": fcfs_profile,
}


def profile_named(name: str, args: Mapping[str, Mapping[str, object]] | None = None) -> Profile:
    """The built-in profile `name`, with `args` changed ({plugin or "cycle": {field: value}})."""
    make = PROFILES.get(name)
    if make is None:
        raise ProfileError(f"no scheduler profile {name!r} (there are: {', '.join(PROFILES)})")
    return make().with_args(args) if args else make()


def profile_for(config: PolicyConfig, name: str = "config") -> Profile:
    """The profile a flat `PolicyConfig` stands for (the form `policy_sim.py --set` sweeps and
    the tests write): the same plugins with the same arguments, each left out where the config
    turns it off. `profile_for(PolicyConfig())` equals `default_profile()`, and the anchors'
    configs (`easy_config`, `fcfs_config`) the `easy` and `fcfs` profiles."""
    c = config
    flexible = c.flexible
    priority = PriorityArgs(
        c.weights,
        c.half_life_s,
        c.age_cap_s,
        c.favor_small,
        c.size_horizon_s,
        c.user_share_weight,
    )
    plugins: list[Plugin] = [
        PrioritySort(priority) if c.ordering == "priority" else FifoSort(FifoSortArgs(priority))
    ]
    if c.protect_oldest > 0:
        plugins.append(OldestFirst(OldestFirstArgs(c.protect_oldest, c.requeue_stopped)))
    behind = c.suspend_factor if c.preemption else 0.0
    plugins += [
        FirstAfterStop(FirstAfterStopArgs(behind, c.requeue_stopped)),
        Quota(),
        Arch(),
        Fit(
            FitArgs(
                c.placement,
                c.cut_to_fit and flexible,
                c.lookahead if flexible else 0,
                c.lookahead_pairs,
            )
        ),
    ]
    if c.preemption:
        plugins.append(
            Preempt(PreemptArgs(c.suspend_factor, c.suspend_max, c.suspend_again_factor))
        )
    if c.migration:
        plugins.append(Migrate(MigrateArgs(c.migrate_min_gain_s)))
    if c.preemption and c.drain_stop_share > 0:
        plugins.append(
            Drain(DrainArgs(c.drain_stop_share, c.drain_stop_min_job, c.drain_stop_min_left_s))
        )
    cut_reserve = c.cut_to_fit and c.cut_reserve and flexible
    plugins.append(Backfill(ReserveArgs(c.reservations, c.backfill, c.placement, cut_reserve)))
    cycle = CycleArgs(
        flexible,
        c.reserve_after_s,
        c.min_run_before_preempt_s,
        c.max_preemptions_per_job,
        c.eta_depth,
    )
    return Profile(name, tuple(plugins), cycle)


def usage_half_life_s(profile: Profile) -> float:
    """The half-life of recorded usage the profile's priorities decay with (fair share)."""
    args = profile.queue_sort.args
    priority = args.priority if isinstance(args, FifoSortArgs) else args
    return (
        priority.half_life_s if isinstance(priority, PriorityArgs) else PriorityArgs().half_life_s
    )
