"""Profiles: the built-in ones are the plugin lists the flat configs stand for, a change of
arguments names a plugin and field that exist, and a profile runs exactly one plugin at each
single extension point."""

from __future__ import annotations

import pytest

from sam_server.scheduling.framework.profile import Profile, ProfileError
from sam_server.scheduling.model import PolicyConfig, easy_config, fcfs_config
from sam_server.scheduling.plugins import Fit, Preempt, PrioritySort
from sam_server.scheduling.profiles import PROFILES, profile_for, profile_named


@pytest.mark.parametrize(
    ("name", "config"),
    [("default", PolicyConfig()), ("easy", easy_config()), ("fcfs", fcfs_config())],
)
def test_a_built_in_profile_is_the_one_its_flat_config_stands_for(
    name: str, config: PolicyConfig
) -> None:
    named, flat = profile_named(name), profile_for(config)
    assert named.plugins == flat.plugins
    assert named.cycle == flat.cycle


def test_easy_and_fcfs_differ_only_in_backfill() -> None:
    easy, fcfs = PROFILES["easy"](), PROFILES["fcfs"]()
    assert easy.reserve.backfill() and not fcfs.reserve.backfill()
    assert [p.name for p in easy.plugins] == [p.name for p in fcfs.plugins]


def test_changed_arguments_reach_the_plugin_and_leave_the_rest() -> None:
    changed = profile_named(
        "default", {"preempt": {"suspend_factor": 5.0}, "cycle": {"eta_depth": 7}}
    )
    preempt = changed.find("preempt")
    assert isinstance(preempt, Preempt) and preempt.args.suspend_factor == 5.0
    assert changed.cycle.eta_depth == 7
    assert changed.find("fit") == profile_named("default").find("fit")


def test_an_unknown_plugin_field_or_profile_is_an_error_naming_what_there_is() -> None:
    with pytest.raises(ProfileError, match="no plugin 'nope'.*preempt"):
        profile_named("default", {"nope": {"x": 1}})
    with pytest.raises(ProfileError, match="no argument suspend.*suspend_factor"):
        profile_named("default", {"preempt": {"suspend": 1}})
    with pytest.raises(ProfileError, match="no scheduler profile 'fast'.*default, easy, fcfs"):
        profile_named("fast")


def test_a_profile_needs_exactly_one_sort_score_and_reserve() -> None:
    with pytest.raises(ProfileError, match="exactly one Reserve"):
        Profile("broken", (PrioritySort(), Fit()))
    with pytest.raises(ProfileError, match="listed twice"):
        Profile("twice", (Fit(), Fit()))
