"""Formatting for people: times, regions, state codes, the occupancy map."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from client.occupancy import occupancy_grid, render_wafer_map
from client.output import (
    format_duration,
    format_region,
    job_elapsed,
    render_key_values,
    render_table,
    state_code,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0:00"), (65, "1:05"), (3723, "1:02:03"), (90061, "1-01:01:01"), (-5, "0:00")],
)
def test_duration_uses_squeue_time_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_state_codes_are_slurm_like_and_unknown_states_stay_words() -> None:
    assert [state_code(s) for s in ("pending", "running", "cancelled", "failed", "preempted")] == [
        "PD",
        "R",
        "CA",
        "F",
        "preempted",
    ]


def test_elapsed_counts_run_time_or_waiting_time() -> None:
    now = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
    waiting = {"created_at": "2026-01-01T00:59:00", "started_at": None, "finished_at": None}
    running = {"created_at": "2026-01-01T00:00:00Z", "started_at": "2026-01-01T00:30:00+00:00"}
    assert job_elapsed(waiting, now) == "1:00"
    assert job_elapsed(running, now) == "30:00"


def test_region_format() -> None:
    assert (
        format_region({"wafer": "wse-0", "row": 10, "col": 20, "rows": 64, "cols": 32})
        == "wse-0:10,20+64x32"
    )
    assert format_region(None) == "-"


def test_table_aligns_columns() -> None:
    assert render_table(["A", "LONG"], [["xyz", None], ["1", 2]]).splitlines() == [
        "A    LONG",
        "xyz  -",
        "1    2",
    ]


def full_wafer(allocations: list[dict]) -> dict:
    return {"id": "wse-0", "arch": "wse2", "rows": 750, "cols": 994, "allocations": allocations}


def test_full_wafer_map_is_downscaled_to_64_columns() -> None:
    grid = occupancy_grid(full_wafer([{"row": 0, "col": 0, "rows": 375, "cols": 994}]))
    assert 0 < len(grid) <= 24 and all(len(line) <= 64 for line in grid)
    assert set(grid[0]) == {"A"} and set(grid[-1]) == {"."}


def test_every_allocation_stays_visible_even_when_tiny() -> None:
    allocations = [
        {"job_id": 1, "tenant": "a", "row": 0, "col": 0, "rows": 300, "cols": 400},
        {"job_id": None, "tenant": "b", "row": 300, "col": 0, "rows": 3, "cols": 3},
    ]
    text = render_wafer_map(full_wafer(allocations))
    grid = "".join(line for line in text.splitlines() if line.startswith("|"))
    assert "A" in grid and "B" in grid
    assert "B  job (hidden)  tenant b  3x3 at (300,0)" in text


def test_small_wafer_map_keeps_the_two_to_one_aspect() -> None:
    wafer = {"rows": 4, "cols": 8, "allocations": [{"row": 2, "col": 4, "rows": 2, "cols": 4}]}
    assert occupancy_grid(wafer) == ["........", "....AAAA"]  # one char = 2 rows x 1 col of PEs


def test_a_name_that_would_lie_on_a_terminal_is_shown_escaped() -> None:
    # a right-to-left override makes "gpj.exe" read as "exe.jpg"; NUL and a forged line break
    # would hide text or invent a row of the listing
    rows = [
        ["j1", "a\u202egpj.exe", "R"],
        ["j2", "x\x00y\nj3  fake  CD", "Q"],
        ["j4", "plain", "Q"],
    ]
    table = render_table(["ID", "NAME", "ST"], rows)
    lines = table.splitlines()
    assert len(lines) == 4  # the header and three rows: no forged row
    assert "a\\u202egpj.exe" in lines[1]
    assert "x\\x00y\\nj3  fake  CD" in lines[2]
    assert lines[3].split() == ["j4", "plain", "Q"]
    assert not any(ch in table for ch in "\u202e\x00")
    view = render_key_values([("Name", "evil\u202etxt.exe"), ("State", "running")])
    assert view.splitlines() == ["Name:  evil\\u202etxt.exe", "State: running"]
