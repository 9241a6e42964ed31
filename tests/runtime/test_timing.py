"""Cycle accounting: charged through the block engine, deterministic, position-independent."""

from __future__ import annotations

import math

import numpy as np
from conftest import artifact_for, run_steps, small_spec

import wse_sim.runtime as rt
from wse_sim import Wafer

ADAM = {"name": "adam", "lr": 0.003}


def test_recorded_step_deltas_equal_replaying_the_engine_every_step() -> None:
    spec = small_spec("gpt", optimizer=ADAM)
    fast = rt.load(artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "fast")
    slow = rt.load(
        artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "slow", replay_timing=True
    )
    run_steps(fast, spec, 3)
    run_steps(slow, spec, 3)
    for name, value in fast.region.counters().items():
        np.testing.assert_array_equal(value, slow.region.counters()[name], err_msg=name)
    assert fast.region.wavelets_sent == slow.region.wavelets_sent > 0


def test_cycles_do_not_depend_on_where_the_region_sits() -> None:
    spec = small_spec("cnn", optimizer=ADAM)
    wafer = Wafer("wse2", rows=20, cols=20)
    a = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "a")
    b = rt.load(artifact_for(spec), wafer, (11, 9, 8, 8), "b")
    assert [r.sim_cycles for r in map(lambda k: a.step(*_batch(spec, k)), range(2))] == [
        r.sim_cycles for r in map(lambda k: b.step(*_batch(spec, k)), range(2))
    ]


def _batch(spec, k):
    from compiler.data import synthetic_batch

    return synthetic_batch(spec, k)


def test_compute_cycles_follow_kernel_flops_and_samples_per_sec_follow_cycles() -> None:
    spec = small_spec("mlp", optimizer=ADAM)
    job = rt.load(artifact_for(spec), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "flops")
    result = job.step(*_batch(spec, 0))
    rate = job.region.arch.fp32_flops_per_cycle
    for kernel in job.kernels:
        _, _, h, w = kernel["rect"]
        assert job.charger.kernel_cycles[kernel["id"]]["compute"] == math.ceil(
            kernel["flops"] / (h * w) / rate
        )
    assert math.isclose(result.samples_per_sec, 8 * job.clock_hz / result.sim_cycles)
    matmuls = [k for k in job.kernels if k["op"] == "matmul" and k["rect"][3] > 1]
    assert matmuls and all(
        job.charger.kernel_cycles[k["id"]].get("broadcast", 0) > 0 for k in matmuls
    )


def test_weight_streaming_pays_for_weights_on_the_host_link() -> None:
    pipelined = small_spec("mlp", optimizer=ADAM)
    streaming = small_spec("mlp", optimizer=ADAM, execution_mode="weight_streaming")
    a = rt.load(artifact_for(pipelined), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "p")
    b = rt.load(artifact_for(streaming), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "s")
    la, lb = run_steps(a, pipelined, 3), run_steps(b, streaming, 3)
    np.testing.assert_allclose(la, lb, rtol=1e-6)
    assert b.total_cycles > a.total_cycles
