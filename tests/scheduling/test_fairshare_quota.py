"""Usage decay, fair-share factors and the submit-time 'can this ever run?' check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam_server.scheduling import (
    PolicyQuota,
    PolicyWafer,
    TenantState,
    can_ever_fit,
    decay_usage,
    update_usage,
)
from sam_server.scheduling.fairshare import combined_factor, tenant_factors, user_factor

DAY = 86400.0


def test_usage_halves_every_half_life() -> None:
    assert decay_usage(1000.0, 7 * DAY, 7 * DAY) == pytest.approx(500.0)
    assert decay_usage(1000.0, 14 * DAY, 7 * DAY) == pytest.approx(250.0)
    assert decay_usage(1000.0, 5 * DAY, 0.0) == 1000.0


@settings(max_examples=30, deadline=None)
@given(st.floats(0, 1e9), st.integers(0, 10**6), st.floats(1, 1e6), st.integers(1, 20))
def test_updating_often_or_rarely_gives_the_same_usage(usage, pes, seconds, steps) -> None:
    once = update_usage(usage, pes, seconds, 7 * DAY)
    many = usage
    for _ in range(steps):
        many = update_usage(many, pes, seconds / steps, 7 * DAY)
    assert many == pytest.approx(once, rel=1e-9, abs=1e-6)
    assert once <= usage + pes * seconds + 1e-6


def test_fair_share_rewards_the_tenant_under_its_share() -> None:
    tenants = {
        "idle": TenantState(PolicyQuota(share=1.0), 0.0),
        "fair": TenantState(PolicyQuota(share=1.0), 100.0),
        "hog": TenantState(PolicyQuota(share=1.0), 300.0),
        "big": TenantState(PolicyQuota(share=2.0), 300.0),
    }
    f = tenant_factors(tenants)
    assert f["idle"] == 1.0
    assert f["idle"] > f["fair"] > f["hog"]
    assert f["big"] > f["hog"]  # same usage, twice the share
    assert all(0.0 <= v <= 1.0 for v in f.values())


def test_a_user_inside_a_tenant_is_weighed_against_its_peers() -> None:
    t = TenantState(PolicyQuota(), 100.0, {"alice": 90.0, "bob": 10.0})
    assert user_factor(t, "bob") > user_factor(t, "alice")
    assert user_factor(t, "carol") == 1.0
    # the tenant's factor bounds the result: a user cannot lift a tenant over its share
    assert combined_factor(0.2, 1.0, 0.25) <= 0.2
    assert combined_factor(0.8, 0.0, 0.25) == pytest.approx(0.6)


WAFERS = [PolicyWafer("w0", 750, 994), PolicyWafer("small", 64, 64, online=False)]


@pytest.mark.parametrize(
    ("rows", "cols", "quota", "fragment"),
    [
        (750, 994, None, None),
        (64, 64, PolicyQuota(max_pes=4096), None),
        (751, 10, None, "larger than every wafer"),
        (10, 995, None, "larger than every wafer"),
        (100, 100, PolicyQuota(max_pes=9999), "max_pes=9999"),
        (1, 1, PolicyQuota(max_running_jobs=0), "max_running_jobs is 0"),
        (0, 5, None, "empty"),
    ],
)
def test_can_ever_fit_rejects_only_jobs_that_can_never_run(rows, cols, quota, fragment) -> None:
    why = can_ever_fit(rows, cols, WAFERS, quota)
    if fragment is None:
        assert why is None
    else:
        assert why is not None and fragment in why
    assert can_ever_fit(5, 5, [], None) is not None
    assert can_ever_fit(60, 60, [(64, 64)], None) is None
