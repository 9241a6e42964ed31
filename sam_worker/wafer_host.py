"""The one simulated wafer a wafer-worker process owns, shared by the jobs it runs at once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from sam_server.config import Settings
from sam_server.db.session import session_scope
from sam_server.services.lifecycle import heartbeat_wafer
from sam_worker.host_memory import HostMemory
from sam_worker.identity import WORKER_ID
from sam_worker.run import RunContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from compiler.artifact import Artifact
    from wse_sim.runtime.job import LoadedJob

log = logging.getLogger("sam.worker.wafer")

REGISTRY = CollectorRegistry()
STEPS = Counter(
    "sam_wafer_steps",
    "Training steps run on this wafer (rate() of it: steps per second)",
    ["wafer"],
    registry=REGISTRY,
)
CHECKPOINT = Histogram(
    "sam_wafer_checkpoint_flush_seconds",
    "Recording a job's progress and newest checkpoint (hash, database, pruning)",
    ["wafer"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
)


class _WaferGauges:
    """Read at scrape time from the wafer's region table: jobs running, PEs, SRAM, fragmentation."""

    def __init__(self, wafer_host: WaferHost) -> None:
        self.host = wafer_host

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from sam_server.scheduling.geometry import FreeSpace

        h = self.host
        with h.lock:
            regions = list(h.wafer.regions.values())
            rects = [(r.row, r.col, r.rows, r.cols) for r in regions]
            sram = sum(float(h.wafer.xp.to_numpy(r.sram_used).sum()) for r in regions)
        space = FreeSpace.of(h.rows, h.cols, rects)
        facts = [
            ("sam_wafer_jobs_running", "Jobs running on this wafer now", len(regions)),
            ("sam_wafer_job_slots", "Jobs this wafer's worker runs at once", h.slots),
            ("sam_wafer_pes", "PEs of this wafer", h.rows * h.cols),
            (
                "sam_wafer_pes_allocated",
                "PEs in the regions of running jobs",
                h.rows * h.cols - space.free_pes,
            ),
            ("sam_wafer_sram_used_bytes", "SRAM the running jobs hold, all PEs together", sram),
            (
                "sam_wafer_host_memory_reserved_bytes",
                "Host memory the running jobs' checked plans reserve (sam_worker.host_memory)",
                h.memory.held,
            ),
            (
                "sam_wafer_fragmentation_ratio",
                "1 - largest free rectangle / free PEs (0 when nothing or one rectangle is free)",
                space.fragmentation(),
            ),
        ]
        for name, doc, value in facts:
            gauge = GaugeMetricFamily(name, doc, labels=["wafer"])
            gauge.add_metric([h.wafer_id], value)
            yield gauge


class WaferHost:
    """A `wse_sim.Wafer` for the cluster file's wafer `wafer_id`, plus its heartbeat thread."""

    def __init__(self, wafer_id: str, settings: Settings) -> None:
        from wse_sim import Wafer

        self.settings = settings
        cluster = settings.load_cluster()
        cfg = next((w for w in cluster.wafers if w.id == wafer_id), None)
        if cfg is None:
            known = ", ".join(w.id for w in cluster.wafers)
            raise SystemExit(f"wafer {wafer_id!r} is not in the cluster file (known: {known})")
        self.wafer_id, self.arch, self.rows, self.cols = (
            cfg.id,
            cfg.arch,
            cfg.rows or 0,
            cfg.cols or 0,
        )
        self.wafer = Wafer(cfg.arch, rows=self.rows, cols=self.cols)
        self.lock = threading.Lock()  # the wafer's region table is shared by the worker's threads
        self._stop = threading.Event()
        self.slots = cfg.max_jobs  # the worker's threads (`sam worker wafer` sets the real count)
        # Host memory its jobs reserve by their checked plans (`sam worker wafer` bounds it).
        self.memory = HostMemory()
        self.steps = STEPS.labels(self.wafer_id)
        self.checkpoint_seconds = CHECKPOINT.labels(self.wafer_id)

    def serve_metrics(self, port: int, host: str) -> None:
        """/metrics of this wafer worker on `port` (a thread of this process)."""
        REGISTRY.register(_WaferGauges(self))
        start_http_server(port, addr=host, registry=REGISTRY)
        log.info("wafer %s metrics on http://%s:%d/metrics", self.wafer_id, host, port)

    def load(self, artifact: Artifact, ctx: RunContext) -> LoadedJob:
        """Load `artifact` into the run's region of this wafer (the region is the job's)."""
        from wse_sim import runtime

        owner = ctx.job_id
        with self.lock:
            if owner in self.wafer.regions:  # a previous attempt of this job died in this process
                self.wafer.release(owner)
            job = runtime.load(artifact, self.wafer, ctx.region, owner)
        # The job holds its own copy of the initial tensors: the artifact's would only double
        # the job's state in this worker (compiler.artifact_check plans host memory so).
        artifact.tensors.clear()
        return job

    def release(self, ctx: RunContext, job: LoadedJob) -> None:
        """Free the run's region (and the loaded job's buffers)."""
        owner = ctx.job_id
        with self.lock:
            try:
                job.release()
            finally:
                if owner in self.wafer.regions:
                    self.wafer.release(owner)

    def beat(self) -> None:
        with session_scope(self.settings.resolved_database_url) as session:
            heartbeat_wafer(
                session,
                wafer_id=self.wafer_id,
                worker=WORKER_ID,
                arch=self.arch,
                rows=self.rows,
                cols=self.cols,
            )

    def start_heartbeat(self) -> None:
        every = self.settings.worker.heartbeat_s

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.beat()
                except Exception as exc:  # noqa: BLE001 - the database may be restarting
                    log.warning("heartbeat of %s failed: %s", self.wafer_id, exc)
                self._stop.wait(every)

        threading.Thread(target=loop, name="wafer-heartbeat", daemon=True).start()


_HOST: WaferHost | None = None


def start_host(wafer_id: str, settings: Settings) -> WaferHost:
    """Make this process the worker of wafer `wafer_id` (`sam worker wafer --wafer ID` calls it
    once, before its tasks run); the WaferHost its tasks then find with `host()`."""
    global _HOST
    _HOST = WaferHost(wafer_id, settings)
    return _HOST


def host() -> WaferHost:
    """This process's wafer (the one `start_host` was given)."""
    if _HOST is None:
        raise RuntimeError("this worker owns no wafer; start it with `sam worker wafer --wafer ID`")
    return _HOST
