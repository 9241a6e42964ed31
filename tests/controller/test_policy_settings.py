"""The operator's scheduler settings (SAM_SCHEDULER_PROFILE, SAM_SCHEDULER_PLUGIN_ARGS and the
two preemption protections) as the live scheduler's profile."""

from __future__ import annotations

import pytest

from sam_server.config import Settings
from sam_server.controller.loop import scheduler_profile
from sam_server.scheduling.plugins import Drain, Preempt
from sam_server.scheduling.profiles import default_profile

NAMES = ("SAM_SCHEDULER_PROFILE", "SAM_SCHEDULER_PLUGIN_ARGS", "SAM_PREEMPT_MIN_RUN_S")


@pytest.fixture(autouse=True)
def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)


def test_unset_settings_run_the_default_profile_with_the_live_protections() -> None:
    """Whatever the default profile's plugins are, an operator who sets nothing runs them; only
    the minimum run comes from the settings (60 s live, where the replay measures 600 s)."""
    live, default = scheduler_profile(Settings()), default_profile()
    assert live.plugins == default.plugins
    assert live.cycle.min_run_before_preempt_s == 60.0
    assert live.cycle.max_preemptions_per_job == default.cycle.max_preemptions_per_job


def test_the_profile_and_plugin_arguments_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "SAM_SCHEDULER_PLUGIN_ARGS",
        '{"preempt": {"suspend_factor": 4, "suspend_max": 2}, "drain": {"share": 0},'
        ' "cycle": {"eta_depth": 50}}',
    )
    live = scheduler_profile(Settings())
    preempt, drain = live.find("preempt"), live.find("drain")
    assert isinstance(preempt, Preempt) and isinstance(drain, Drain)
    assert (preempt.args.suspend_factor, preempt.args.suspend_max) == (4.0, 2)
    assert drain.args.share == 0.0 and live.cycle.eta_depth == 50
    monkeypatch.setenv("SAM_SCHEDULER_PROFILE", "fcfs")
    monkeypatch.setenv("SAM_SCHEDULER_PLUGIN_ARGS", "")
    fcfs = scheduler_profile(Settings())
    assert fcfs.name == "fcfs" and not fcfs.reserve.backfill()


@pytest.mark.parametrize(
    ("profile", "args", "message"),
    [
        ("fast", "{}", "no scheduler profile 'fast'"),
        ("default", '{"preempt": {"suspend_factor": "often"}}', "suspend_factor"),
        ("default", '{"preempt": {"factor": 1}}', "no argument factor"),
        ("easy", '{"preempt": {"suspend_factor": 1}}', "no plugin 'preempt'"),
        ("default", "{not json", "not JSON"),
    ],
)
def test_a_bad_profile_or_argument_is_refused_at_start_with_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, profile: str, args: str, message: str
) -> None:
    monkeypatch.setenv("SAM_SCHEDULER_PROFILE", profile)
    monkeypatch.setenv("SAM_SCHEDULER_PLUGIN_ARGS", args)
    with pytest.raises(ValueError, match=message):
        Settings()
