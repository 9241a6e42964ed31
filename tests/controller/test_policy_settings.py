"""The operator's policy settings (SAM_ environment variables) as the live scheduler's policy."""

from __future__ import annotations

from dataclasses import fields

import pytest

from sam_server.config import Settings
from sam_server.controller.loop import SUSPENSION_SETTINGS, policy_config
from sam_server.scheduling import PolicyConfig


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SUSPENSION_SETTINGS:
        monkeypatch.delenv(f"SAM_{name.upper()}", raising=False)


def test_unset_suspension_settings_keep_the_policys_defaults(monkeypatch):  # type: ignore[no-untyped-def]
    """Whatever PolicyConfig's defaults are, an operator who sets nothing runs them."""
    _clear(monkeypatch)
    live = policy_config(Settings())
    default = PolicyConfig()
    for name in SUSPENSION_SETTINGS:
        assert getattr(live, name) == getattr(default, name), name
    preemption = {"min_run_before_preempt_s", "max_preemptions_per_job"}
    for f in fields(PolicyConfig):  # and every other knob but the two preemption settings
        if f.name not in preemption:
            assert getattr(live, f.name) == getattr(default, f.name), f.name


def test_suspension_settings_come_from_the_environment(monkeypatch):  # type: ignore[no-untyped-def]
    _clear(monkeypatch)
    monkeypatch.setenv("SAM_SUSPEND_FACTOR", "10")
    monkeypatch.setenv("SAM_SUSPEND_MAX", "2")
    monkeypatch.setenv("SAM_SUSPEND_AGAIN_FACTOR", "0")
    monkeypatch.setenv("SAM_SUSPEND_WAIT_SHARE", "0.5")
    monkeypatch.setenv("SAM_REQUEUE_STOPPED", "true")
    live = policy_config(Settings())
    assert (live.suspend_factor, live.suspend_max, live.suspend_again_factor) == (10.0, 2, 0.0)
    assert (live.suspend_wait_share, live.requeue_stopped) == (0.5, True)
    monkeypatch.setenv("SAM_SUSPEND_FACTOR", "0")  # off, whatever the policy's default
    assert policy_config(Settings()).suspend_factor == 0.0


def test_a_negative_suspension_setting_is_refused(monkeypatch):  # type: ignore[no-untyped-def]
    _clear(monkeypatch)
    monkeypatch.setenv("SAM_SUSPEND_FACTOR", "-1")
    with pytest.raises(ValueError, match="suspend_factor"):
        Settings()


def test_drain_stop_settings_come_from_the_environment(monkeypatch):  # type: ignore[no-untyped-def]
    _clear(monkeypatch)
    assert policy_config(Settings()).drain_stop_share == PolicyConfig().drain_stop_share > 0
    monkeypatch.setenv("SAM_DRAIN_STOP_SHARE", "0")
    monkeypatch.setenv("SAM_DRAIN_STOP_MIN_JOB", "0.75")
    monkeypatch.setenv("SAM_DRAIN_STOP_MIN_LEFT_S", "3600")
    live = policy_config(Settings())
    assert (live.drain_stop_share, live.drain_stop_min_job) == (0.0, 0.75)
    assert live.drain_stop_min_left_s == 3600.0
    monkeypatch.setenv("SAM_DRAIN_STOP_SHARE", "1.5")  # a share of the job's PEs: at most 1
    with pytest.raises(ValueError):
        Settings()
