"""The controller keeps what survives a cycle out of the cyclic collector's full passes, and
hands it back once a minute so reference cycles among those objects are still reclaimed."""

from __future__ import annotations

import gc
import weakref

import pytest

from sam_server.controller import loop


@pytest.fixture(autouse=True)
def _thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_survivors_are_frozen_between_thaws_and_thawed_once_a_minute(monkeypatch):
    clock = {"t": 1000.0}
    monkeypatch.setattr(loop.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(loop, "_heap", {"thawed_at": 0.0})

    loop.settle_heap()  # the first call after a minute thaws (nothing frozen yet)
    assert gc.get_freeze_count() == 0

    kept = [[i] for i in range(1000)]  # objects a cycle leaves behind
    clock["t"] += 1.0
    loop.settle_heap()
    frozen = gc.get_freeze_count()
    assert frozen >= len(kept)

    clock["t"] += loop.THAW_EVERY_S
    loop.settle_heap()
    assert gc.get_freeze_count() == 0


def test_a_reference_cycle_left_by_a_cycle_is_reclaimed_after_the_thaw(monkeypatch):
    class Node:
        pass

    clock = {"t": 1000.0}
    monkeypatch.setattr(loop.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(loop, "_heap", {"thawed_at": clock["t"]})

    a, b = Node(), Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    loop.settle_heap()  # frozen with the cycle's survivors
    del a, b
    gc.collect()
    assert alive() is not None  # the permanent generation is not collected

    clock["t"] += loop.THAW_EVERY_S
    loop.settle_heap()
    gc.collect()
    assert alive() is None
