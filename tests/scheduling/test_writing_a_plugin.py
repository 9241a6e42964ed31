"""A new plugin (keep_tenant_off.py: no job of tenant X on wafer Y) plus one profile line, and
the plan obeys it: no start, reservation, stop or move puts such a job on that wafer, while the
default profile would, and other tenants' jobs still go there."""

from __future__ import annotations

from sam_server.scheduling import plan
from sam_server.scheduling.framework.profile import Profile
from sam_server.scheduling.profiles import default_profile

from .factories import job, running, snapshot
from .keep_tenant_off import KeepTenantOff, KeepTenantOffArgs

DEFAULT = default_profile()
NO_ACME_ON_W1 = Profile(
    "no-acme-on-w1", (*DEFAULT.plugins, KeepTenantOff(KeepTenantOffArgs("acme", "w1")))
)


def test_the_filter_keeps_the_tenant_off_the_wafer_and_lets_others_on() -> None:
    # w0 is full until t=100; w1 is empty. acme's job fits only w1 now, bob's too.
    held, alloc = running(9, 0, 0, 8, 8, limit=100.0, tenant="bob")
    acme = job(1, 8, 8, tenant="acme", submitted=0.0)
    bob = job(2, 4, 4, tenant="bob", submitted=1.0)
    snap = snapshot([("w0", 8, 8), ("w1", 8, 8)], [held, acme, bob], {"w0": [alloc]})

    usual = plan(snap, 10.0, profile=DEFAULT)
    assert {(s.job_id, s.wafer_id) for s in usual.starts} == {(1, "w1")}

    kept = plan(snap, 10.0, profile=NO_ACME_ON_W1)
    assert [(s.job_id, s.wafer_id) for s in kept.starts] == [(2, "w1")]
    assert all(r.wafer_id != "w1" for r in kept.reservations if r.job_id == 1)
    assert all(p.to is None or p.to[0] != "w1" for p in kept.preemptions)
    assert 1 in kept.waiting


def test_the_filter_holds_for_preemption_too() -> None:
    # An urgent acme job: both wafers hold a low-class job it could preempt. The default takes
    # w0's (ties go to the first wafer); kept off w0, acme's job stops w1's instead.
    low0, a0 = running(8, 0, 0, 8, 8, cls="low", tenant="bob", limit=10_000.0)
    low1, a1 = running(9, 0, 0, 8, 8, cls="low", tenant="bob", limit=10_000.0, started=-5.0)
    urgent = job(1, 8, 8, tenant="acme", cls="urgent", submitted=0.0)
    snap = snapshot([("w0", 8, 8), ("w1", 8, 8)], [low0, low1, urgent], {"w0": [a0], "w1": [a1]})
    at = 5_000.0
    no_acme_on_w0 = Profile("x", (*DEFAULT.plugins, KeepTenantOff(KeepTenantOffArgs("acme", "w0"))))
    assert [p.job_id for p in plan(snap, at, profile=DEFAULT).preemptions] == [8]
    kept = plan(snap, at, profile=no_acme_on_w0)
    assert [p.job_id for p in kept.preemptions] == [9]
    assert kept.reservation is not None and kept.reservation.wafer_id == "w1"
