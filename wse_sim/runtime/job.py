"""A compiled training step loaded into a region of a simulated wafer: `load` and `LoadedJob`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from sam_domain.geometry import Rect
from sam_domain.ir import IrGraph
from wse_sim.fabric import Region, Wafer
from wse_sim.runtime.blas import limit_blas_threads
from wse_sim.runtime.program import Program, compile_program
from wse_sim.runtime.timing import StepCharger, build_plan

_MEMORY_KINDS = ("weights", "gradients", "optimizer", "activations")


class ArtifactMismatchError(ValueError):
    """The artifact cannot run in this region (wrong shape or missing data); recompile the job for it."""


class JobReleasedError(RuntimeError):
    """The job was released (its region and SRAM are gone); load the artifact again to continue."""


@dataclass(frozen=True)
class StepResult:
    """One training step: its loss (before the update), simulated cycles and samples/s, and
    for a classification loss the share of predictions (argmax of the logits) that were right."""

    loss: float
    sim_cycles: int
    samples_per_sec: float
    accuracy: float | None = None
    skipped: bool = False  # loss scaling found inf/nan gradients: no update was applied
    loss_scale: float | None = None  # the loss scale after this step (None: no loss scaling)


class LoadedJob:
    """An artifact resident in a wafer region; `step` runs one training step on its PEs.

    State (params, buffers, optimizer state, constants) lives in `self.state` as numpy arrays
    keyed by IR input name; `steps_done` is the number of updates applied (the graph's step input).
    """

    def __init__(
        self,
        artifact: Any,
        wafer: Wafer,
        region: Region,
        owner_allocated: bool,
        *,
        replay_timing: bool = False,
    ) -> None:
        self.artifact, self.wafer, self.region = artifact, wafer, region
        self.manifest: dict[str, Any] = dict(artifact.manifest)
        self.graph: IrGraph = artifact.graph
        self._owner_allocated = owner_allocated
        self.fp16 = bool(self.manifest.get("fp16", False))
        self.batch_size = int(self.manifest.get("batch_size") or 0)
        self.steps_done = 0
        self.total_cycles = 0
        self.steps_run = 0
        self.wall_seconds = 0.0  # host time spent in step(), never mixed with simulated time
        self.released = False
        self.kernels = list(self.manifest.get("kernels") or [])
        rects = {k["id"]: tuple(int(v) for v in k["rect"]) for k in self.kernels}
        whole = (0, 0, region.rows, region.cols)
        seed = int(((self.manifest.get("train") or {}).get("seed")) or 0)
        self.program: Program = compile_program(
            self.graph,
            # rects' values are 4-tuples built by tuple(), which mypy sees as tuple[int, ...]
            lambda kid: rects.get(kid, whole) if kid else whole,  # type: ignore[arg-type,return-value]
            fp16=self.fp16,
            seed=seed,
            step_of=lambda: self.steps_done,
            keep=_accuracy_refs(self.graph),
        )
        self.state: dict[str, np.ndarray] = _initial_state(
            self.graph, artifact.tensors, self.program
        )
        self._roles = {i["name"]: i["role"] for i in self.graph["inputs"]}
        self._batch_slots = [
            (self.program.input_slots[n], self.program.input_dtypes[n], r)
            for n, r in self._roles.items()
            if r in ("input", "target")
        ]
        self._step_slot = next(
            (self.program.input_slots[n] for n, r in self._roles.items() if r == "step"), None
        )
        self._micro_slot = next(
            (self.program.input_slots[n] for n, r in self._roles.items() if r == "micro"), None
        )
        self.micro_batches = int(self.manifest.get("micro_batches") or 1)
        self._scale_name = next(
            (i["name"] for i in self.graph["inputs"] if i.get("source_name") == "_amp.scale"), None
        )
        self._state_slots = [(self.program.input_slots[n], n) for n in self.state]
        self._accuracy_slots = _accuracy_slots(self.graph, self.program.slots)
        plan = build_plan(
            self.graph,
            self.kernels,
            fp16=self.fp16,
            weight_streaming=self.manifest.get("execution_mode") == "weight_streaming",
            region_shape=(region.rows, region.cols),
            optimizer_offload=bool(self.manifest.get("optimizer_state_offload")),
            global_checks=step_checks(self.manifest),
        )
        self.charger = StepCharger(plan, replay=replay_timing)

    @property
    def clock_hz(self) -> float:
        """The arch clock that converts simulated cycles to seconds."""
        return float(self.region.arch.clock_hz)

    def step(self, inputs: np.ndarray, targets: np.ndarray) -> StepResult:
        """Run one training step on this batch (inputs/targets shaped as at compile time).

        Updates the state in place and advances the region's clocks; returns loss, cycles, samples/s.
        """
        if self.released:
            raise JobReleasedError(
                "this job was released; load the artifact again to run more steps"
            )
        started = time.perf_counter()
        losses, cycles, env, accuracies = [], 0, [], []
        for micro, (x, y) in enumerate(_split(inputs, targets, self.micro_batches)):
            env = self._run_once(x, y, micro)
            losses.append(float(env[self.program.loss_slot]))
            accuracies.append(_accuracy(env, self._accuracy_slots))
            cycles += self.charger.charge(self.region)
        self.steps_done += 1
        self.total_cycles += cycles
        self.steps_run += 1
        self.wall_seconds += time.perf_counter() - started
        batch = self.batch_size or int(np.shape(inputs)[0])
        found = self.program.metric_slots.get("found_inf")
        return StepResult(
            # micro-batches are equal slices, so the mean of their mean losses is the batch's
            float(np.mean(np.asarray(losses, dtype=np.float64))),
            cycles,
            batch * self.clock_hz / max(cycles, 1),
            # equal micro-batches: the batch's accuracy is the mean of theirs
            accuracy=_mean_or_none(accuracies),
            skipped=found is not None and bool(env[found] > 0),
            loss_scale=float(self.state[self._scale_name]) if self._scale_name else None,
        )

    def _run_once(self, inputs: np.ndarray, targets: np.ndarray, micro: int) -> list[Any]:
        """Run the graph once on one (micro-)batch and apply its state updates; returns env."""
        env = self.program.new_env()
        for slot, name in self._state_slots:
            env[slot] = self.state[name]
        for slot, dtype, role in self._batch_slots:
            env[slot] = np.asarray(inputs if role == "input" else targets, dtype=dtype)
        if self._step_slot is not None:
            env[self._step_slot] = np.asarray(self.steps_done, dtype=np.float32)
        if self._micro_slot is not None:
            env[self._micro_slot] = np.asarray(micro, dtype=np.float32)
        for run in self.program.runs:
            run(env)
        for name, slot in self.program.state_updates:
            self.state[name] = env[slot]
        return env

    def state_dict(self) -> dict[str, np.ndarray]:
        """Weights, buffers and optimizer state keyed by source name ("fc1.weight.exp_avg"), plus
        "_steps_done" (the number of updates applied)."""
        names = {i["name"]: i.get("source_name") or i["name"] for i in self.graph["inputs"]}
        out = {
            names[n]: np.array(v, copy=True)
            for n, v in self.state.items()
            if self._roles[n] != "constant"
        }
        out["_steps_done"] = np.asarray(self.steps_done, dtype=np.int64)
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore what `state_dict` returned (shapes must match the artifact's)."""
        by_source = {
            i.get("source_name") or i["name"]: i["name"]
            for i in self.graph["inputs"]
            if i["name"] in self.state
        }
        for source, name in by_source.items():
            if self._roles[name] == "constant":
                continue
            if source not in state:
                raise ArtifactMismatchError(
                    f"checkpoint lacks {source!r}; it was written by another job's artifact"
                )
            value = np.asarray(state[source], dtype=self.program.input_dtypes[name])
            if value.shape != self.state[name].shape:
                raise ArtifactMismatchError(
                    f"checkpoint {source!r} has shape {value.shape}, the artifact needs {self.state[name].shape}"
                )
            self.state[name] = value.copy()
        if "_steps_done" in state:
            self.steps_done = int(state["_steps_done"])

    def release(self) -> None:
        """Free the job's SRAM (and its region, when `load` allocated it)."""
        if self.released:
            return
        for kid in list(self.region.allocations):
            if kid.startswith("job:"):
                self.region.sram_free(kid)
        if self._owner_allocated and self.region.owner in self.wafer.regions:
            self.wafer.release(self.region.owner)
        self.released = True


def _accuracy_args(graph: IrGraph) -> tuple[str, str, int] | None:
    """(log-probabilities, targets, ignore_index) of the step's classification loss
    (cross_entropy traces to log_softmax + nll_loss), or None for other losses."""
    for node in graph["nodes"]:
        if not str(node["target"]).startswith("aten.nll_loss_forward"):
            continue
        args = node.get("args") or []
        if len(args) > 1 and isinstance(args[0], dict) and isinstance(args[1], dict):
            ignore = args[4] if len(args) > 4 and isinstance(args[4], int) else -100
            return str(args[0]["ref"]), str(args[1]["ref"]), ignore
    return None


def _accuracy_refs(graph: IrGraph) -> frozenset[str]:
    """The values the accuracy reads after the step (kept alive to its end)."""
    found = _accuracy_args(graph)
    return frozenset(found[:2]) if found else frozenset()


def _accuracy_slots(graph: IrGraph, slots: dict[str, int]) -> tuple[int, int, int] | None:
    """(log-probabilities slot, targets slot, ignore_index) of the step's classification loss."""
    found = _accuracy_args(graph)
    return (slots[found[0]], slots[found[1]], found[2]) if found else None


def _mean_or_none(values: list[float | None]) -> float | None:
    """The mean of `values`, or None if any is None (no classification loss)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known and len(known) == len(values) else None


def _accuracy(env: Any, found: tuple[int, int, int] | None) -> float | None:
    """Share of rows whose argmax over classes equals the target (ignored targets excluded)."""
    if found is None:
        return None
    logp, targets, ignore = np.asarray(env[found[0]]), np.asarray(env[found[1]]), found[2]
    if logp.ndim == 0:
        return None
    predicted = logp.reshape(-1, logp.shape[-1]).argmax(axis=-1)
    wanted = targets.reshape(-1)
    keep = wanted != ignore
    if predicted.shape != wanted.shape or not keep.any():
        return None
    return float((predicted[keep] == wanted[keep]).mean())


def _initial_state(
    graph: IrGraph, tensors: dict[str, np.ndarray], program: Program
) -> dict[str, np.ndarray]:
    state = {}
    for inp in graph["inputs"]:
        if inp["role"] not in ("param", "buffer", "opt_state", "constant", "grad_acc"):
            continue
        if inp["name"] not in tensors:
            raise ArtifactMismatchError(
                f"init.npz lacks {inp['name']} ({inp.get('source_name')}); recompile the job"
            )
        state[inp["name"]] = np.array(
            tensors[inp["name"]], dtype=program.input_dtypes[inp["name"]], copy=True
        )
    return state


def _split(
    inputs: np.ndarray, targets: np.ndarray, count: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` equal micro-batches along dim 0 (the compiler chose a count dividing the batch)."""
    if count <= 1:
        return [(inputs, targets)]
    if np.shape(inputs)[0] % count:
        raise ArtifactMismatchError(
            f"a batch of {np.shape(inputs)[0]} does not split into {count} micro-batches; "
            "use the batch_size the job was compiled for"
        )
    return list(
        zip(np.split(np.asarray(inputs), count), np.split(np.asarray(targets), count), strict=True)
    )


def step_checks(manifest: dict[str, Any]) -> list[str]:
    """The whole-region reductions a step runs after its gradients exist: the global gradient
    norm (clip by norm) and GradScaler's inf/nan check."""
    train = manifest.get("train") or {}
    checks = []
    if (train.get("grad_clip") or {}).get("max_norm") is not None:
        checks.append("grad_norm")
    if manifest.get("loss_scaling"):
        checks.append("found_inf")
    return checks


def _allocate_sram(region: Region, manifest: dict[str, Any]) -> None:
    """Reserve every kernel's per-PE bytes (weights, gradients, optimizer, activations) on its rect.

    The compiler's "reserve" share is the arch's runtime area, which the region's limit already
    excludes, so it is not allocated twice. Raises wse_sim's SramCapacityError when over.
    """
    for kernel in manifest.get("kernels") or []:
        memory = kernel.get("memory_per_pe") or {}
        need = int(sum(int(memory.get(kind) or 0) for kind in _MEMORY_KINDS))
        if need:
            r, c, h, w = (int(v) for v in kernel["rect"])
            region.sram_alloc(f"job:{kernel['id']}", need, rect=(r, c, h, w))


def load(
    artifact: Any, wafer: Wafer, region_rect: Rect, owner: str, *, replay_timing: bool = False
) -> LoadedJob:
    """Load `artifact` (compiler.artifact.Artifact) into the region (row, col, rows, cols) of `wafer`.

    Allocates the region for `owner` unless the owner already holds exactly that rectangle, then
    reserves SRAM per the artifact's memory map (SramCapacityError if it does not fit).
    Also keeps numpy's BLAS single-threaded (see `wse_sim.runtime.blas`).
    """
    limit_blas_threads(1)
    row, col, rows, cols = (int(v) for v in region_rect)
    want = artifact.manifest.get("region") or {}
    if want and (int(want.get("rows", rows)) > rows or int(want.get("cols", cols)) > cols):
        raise ArtifactMismatchError(
            f"the artifact was compiled for a {want['rows']}x{want['cols']} region but got {rows}x{cols}; "
            "recompile for this region shape or place the job in a region at least that large"
        )
    existing = wafer.regions.get(owner)
    allocated = existing is None
    if existing is not None and (existing.row, existing.col, existing.rows, existing.cols) != (
        row,
        col,
        rows,
        cols,
    ):
        raise ArtifactMismatchError(
            f"owner {owner!r} already holds another region {existing}; release it first"
        )
    region = existing or wafer.allocate(owner, row, col, rows, cols)
    try:
        _allocate_sram(region, artifact.manifest)
        return LoadedJob(artifact, wafer, region, allocated, replay_timing=replay_timing)
    except BaseException:
        for name in [n for n in region.allocations if n.startswith("job:")]:
            region.sram_free(name)
        if allocated:
            wafer.release(owner)
        raise
