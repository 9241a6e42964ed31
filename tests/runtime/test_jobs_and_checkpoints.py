"""Jobs sharing a wafer, checkpoints and resume, the NaN stop, SRAM accounting and the report."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import artifact_for, run_steps, small_spec

import wse_sim.runtime as rt
from compiler.data import synthetic_batch
from compiler.errors import UnsupportedOperator
from wse_sim import SramCapacityError, Wafer

ADAM = {"name": "adam", "lr": 0.003}


def _batches(spec: dict, start: int = 0):
    step = start
    while True:
        yield synthetic_batch(spec, step)
        step += 1


def _train(job, spec, start, total, *, batches=None, records=None, **kw):
    """Train `job` from step `start` to `total` on `batches` (default: the spec's synthetic ones),
    appending each step's record to `records`; kw: every, ckpt, stop."""
    records = [] if records is None else records
    outcome = rt.train(
        job,
        _batches(spec, start) if batches is None else batches,
        start_step=start,
        total_steps=total,
        checkpoint_every=kw.get("every"),
        checkpoint_dir=kw.get("ckpt"),
        stop_on_nan=True,
        on_step=records.append,
        should_stop=kw.get("stop", lambda: False),
    )
    return outcome, records


def test_two_jobs_on_one_wafer_match_running_alone() -> None:
    mlp, gpt = small_spec("mlp", optimizer=ADAM), small_spec("gpt", optimizer=ADAM)
    alone = {}
    for name, spec in (("mlp", mlp), ("gpt", gpt)):
        job = rt.load(artifact_for(spec), Wafer("wse2", rows=16, cols=16), (0, 0, 8, 8), name)
        alone[name] = [job.step(*synthetic_batch(spec, k)) for k in range(6)]
    shared = Wafer("wse2", rows=16, cols=16)
    jobs = {
        "mlp": rt.load(artifact_for(mlp), shared, (0, 0, 8, 8), "mlp"),
        "gpt": rt.load(artifact_for(gpt), shared, (8, 8, 8, 8), "gpt"),
    }
    together: dict[str, list] = {"mlp": [], "gpt": []}
    for k in range(6):  # interleaved, as the wafer worker runs them
        for name, spec in (("mlp", mlp), ("gpt", gpt)):
            together[name].append(jobs[name].step(*synthetic_batch(spec, k)))
    assert together == alone
    assert shared.regions["mlp"].cycles == alone["mlp"][0].sim_cycles * 6


def test_two_jobs_in_concurrent_threads_match_running_alone() -> None:
    """The wafer worker steps its jobs from separate threads."""
    mlp, cnn = small_spec("mlp", optimizer=ADAM), small_spec("cnn", optimizer=ADAM)
    alone = {
        name: run_steps(
            rt.load(artifact_for(spec), Wafer("wse2", rows=16, cols=16), (0, 0, 8, 8), name),
            spec,
            8,
        )
        for name, spec in (("mlp", mlp), ("cnn", cnn))
    }
    shared = Wafer("wse2", rows=16, cols=16)
    jobs = {
        "mlp": (rt.load(artifact_for(mlp), shared, (0, 8, 8, 8), "mlp"), mlp),
        "cnn": (rt.load(artifact_for(cnn), shared, (8, 0, 8, 8), "cnn"), cnn),
    }
    results: dict[str, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda n=name: results.__setitem__(n, run_steps(*jobs[n], 8)))
        for name in jobs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in jobs:
        np.testing.assert_array_equal(results[name], alone[name])


def test_resume_from_checkpoint_gives_the_uninterrupted_losses(tmp_path: Path) -> None:
    spec = small_spec("mlp", optimizer=ADAM)
    artifact = artifact_for(spec)
    full = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "full")
    outcome, records = _train(full, spec, 0, 12, every=5, ckpt=tmp_path)
    assert (
        outcome.status == "succeeded"
        and outcome.last_step == 11
        and outcome.last_checkpoint_step == 10
    )
    step, path = rt.latest_checkpoint(tmp_path)
    assert step == 10 and json.loads(path.with_suffix(".json").read_text())["step"] == 10
    resumed = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "resumed")
    resumed.load_state_dict(rt.load_checkpoint(path))
    outcome2, records2 = _train(resumed, spec, step, 12)
    assert [r.step for r in records2] == [10, 11]
    assert [r.loss for r in records2] == [r.loss for r in records[10:]]


def test_latest_checkpoint_ignores_incomplete_writes(tmp_path: Path) -> None:
    rt.save_checkpoint(tmp_path, 4, {"w": np.ones(3, np.float32)})
    (tmp_path / "step-00000008.npz").write_bytes(b"partial")  # its JSON never got written
    assert rt.latest_checkpoint(tmp_path) == (4, tmp_path / "step-00000004.npz")
    assert rt.latest_checkpoint(tmp_path / "missing") is None


def test_nan_loss_stops_with_numerical_and_the_step() -> None:
    spec = small_spec("mlp", optimizer=ADAM)
    job = rt.load(artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "nan")

    def poisoned():
        for k, (x, y) in enumerate(_batches(spec)):
            yield (np.full_like(x, np.nan) if k == 3 else x), y

    outcome, records = _train(job, spec, 0, 10, batches=poisoned())
    assert outcome.status == "numerical" and outcome.last_step == 3
    assert "step 3" in outcome.message and len(records) == 4 and np.isnan(records[-1].loss)


def test_should_stop_ends_the_run_between_steps() -> None:
    spec = small_spec("mlp", optimizer=ADAM)
    job = rt.load(artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "stop")
    records: list = []
    outcome, _ = _train(job, spec, 0, 10, records=records, stop=lambda: len(records) >= 2)
    assert outcome.status == "stopped" and outcome.last_step == 1 and len(records) == 2


def test_load_reserves_sram_and_release_frees_the_region() -> None:
    spec = small_spec("mlp", optimizer=ADAM)
    wafer = Wafer("wse2", rows=8, cols=8)
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "mem")
    assert int(np.max(job.region.sram_used)) > 0
    job.release()
    assert wafer.free_pes == 64 and "mem" not in wafer.regions
    with pytest.raises(rt.JobReleasedError):
        job.step(*synthetic_batch(spec, 0))


def test_an_artifact_that_does_not_fit_raises_sram_capacity_error() -> None:
    artifact = artifact_for(small_spec("mlp", optimizer=ADAM))
    kernels = [
        dict(k, memory_per_pe={**k["memory_per_pe"], "activations": 60_000})
        for k in artifact.manifest["kernels"]
    ]
    big = type(artifact)(
        **{**vars(artifact), "manifest": {**artifact.manifest, "kernels": kernels}}
    )
    wafer = Wafer("wse2", rows=8, cols=8)
    with pytest.raises(SramCapacityError):
        rt.load(big, wafer, (0, 0, 8, 8), "big")
    assert wafer.free_pes == 64, "a failed load must give the region back"


def test_report_has_throughput_kernels_heatmaps_and_compile_summary(tmp_path: Path) -> None:
    spec = small_spec("cnn", optimizer=ADAM)
    job = rt.load(artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "rep")
    run_steps(job, spec, 3)
    report = rt.report(job, tmp_path)
    json.dumps(report)
    assert report["throughput"]["steps"] == 3 and report["throughput"]["samples_per_sec"] > 0
    assert report["throughput"]["host_wall_seconds_per_step"] > 0
    assert {k["id"] for k in report["kernels"]} >= {k["id"] for k in job.manifest["kernels"]}
    assert all(k["total_cycles_per_step"] > 0 for k in report["kernels"])
    assert 0 < report["utilization_mean"] <= 1 and report["sram_high_water_bytes"] > 0
    assert report["compile"]["cache_key"] == job.manifest["cache_key"]
    for png in report["heatmaps"].values():
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # each picture's colour bar spans 0 .. this job's own maximum, not a fixed 0..1
    util_max = float(job.region.utilization().max())
    assert report["heatmap_scales"]["utilization"]["max"] == pytest.approx(util_max)
    assert report["heatmap_scales"]["sram"]["max"] == pytest.approx(
        report["sram_high_water_bytes"] / 1024
    )


def test_dropout_is_deterministic_and_resumes_exactly() -> None:
    spec = small_spec(
        "gpt", optimizer=ADAM, kwargs={"d_model": 16, "n_heads": 2, "n_layers": 1, "dropout": 0.2}
    )
    try:
        artifact = artifact_for(spec)
    except UnsupportedOperator as exc:  # the compiler's op set decides; the runtime has the kernels
        pytest.skip(f"the compiler rejects dropout: {exc}")
    assert any(
        "dropout" in n["target"] or "bernoulli" in n["target"] for n in artifact.graph["nodes"]
    )
    first = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "one")
    losses = run_steps(first, spec, 2)
    saved = first.state_dict()
    losses = np.concatenate([losses, run_steps(first, spec, 2, start=2)])
    again = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "two")
    again.load_state_dict(saved)
    assert np.array_equal(run_steps(again, spec, 2, start=2), losses[2:])
    assert np.isfinite(losses).all()


def test_a_checkpoint_changed_after_saving_is_never_loaded(tmp_path: Path) -> None:
    rt.save_checkpoint(tmp_path, 4, {"w": np.ones(3, np.float32)})
    rt.save_checkpoint(tmp_path, 8, {"w": np.full(3, 2.0, np.float32)})
    assert rt.load_checkpoint(tmp_path / "step-00000008.npz")["w"].tolist() == [2.0, 2.0, 2.0]
    np.savez(tmp_path / "step-00000008.npz", w=np.full(3, np.nan, np.float32))
    with pytest.raises(rt.CheckpointError, match="does not match the hash"):
        rt.load_checkpoint(tmp_path / "step-00000008.npz")
    assert [s for s, _ in rt.list_checkpoints(tmp_path)] == [8, 4]
    four = tmp_path / "step-00000004.npz"
    assert rt.load_checkpoint(four)["w"].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(rt.CheckpointError):  # the hash kept apart (the database's) must match
        rt.load_checkpoint(four, expected_sha256="0" * 64)
    assert rt.load_checkpoint(four, expected_sha256=rt.checkpoint_sha256(four))["w"].shape == (3,)
