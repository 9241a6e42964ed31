"""`sam explain`'s ETA line: an estimate that has already passed is said so in words, never
printed as "(0:00 ago)" (a compiling job's ETA is the plan's own time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from client.commands.jobs import explanation_text


def _iso(delta_s: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta_s)).isoformat()


def test_a_compiling_job_whose_eta_passed_waits_for_its_compile() -> None:
    text = explanation_text("j1", {"state": "compiling", "eta": _iso(-0.5), "reasons": []})
    assert "ago" not in text
    assert "ETA: as soon as its compile ends" in text


def test_a_pending_job_past_its_eta_is_due_at_the_next_cycle() -> None:
    text = explanation_text("j1", {"state": "pending", "eta": _iso(-90), "reasons": []})
    assert "ago" not in text and "ETA: any moment" in text


def test_a_future_eta_is_shown_with_the_time_left() -> None:
    text = explanation_text("j1", {"state": "pending", "eta": _iso(330), "reasons": []})
    assert "(in 5:" in text
    assert "ETA: unknown" in explanation_text("j1", {"state": "queued", "eta": None})
