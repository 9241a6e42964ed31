"""Several schedulers may be started; exactly one leads at a time, and another takes over."""

from __future__ import annotations

from sam_server.controller.leader import Leadership


def test_one_leader_at_a_time_and_takeover(db_url, tmp_path):
    first = Leadership(db_url, tmp_path)
    second = Leadership(db_url, tmp_path)
    assert first.try_acquire() is True
    assert second.try_acquire() is False
    assert first.try_acquire() is True  # re-entrant for the holder
    first.release()
    assert second.try_acquire() is True
    assert first.try_acquire() is False
    second.release()
