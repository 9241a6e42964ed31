"""The controller loop: a planning cycle on every change (job events) and on a short timer.

One cycle, in one transaction: reap expired leases, charge usage, snapshot, `plan()`, write the
decisions and their outbox messages. After the commit the outbox is dispatched to Celery (the
sender, like every broker name, is `sam_server.broker`'s: the loop imports no worker code); a
message that cannot be sent (broker down) stays in the outbox and is sent on a later cycle.
"""

from __future__ import annotations

import gc
import logging
import signal
import time
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sam_server.broker import Sender, celery_sender
from sam_server.config import ClusterConfig, Settings
from sam_server.controller.decisions import ExplainSelection, apply_plan
from sam_server.controller.gates import gate_jobs
from sam_server.controller.leader import Leadership
from sam_server.controller.metrics import SchedulerMetrics
from sam_server.controller.reaper import reap_expired
from sam_server.controller.reuse import reuse_compiled
from sam_server.controller.snapshot import build_snapshot, forget_active_jobs, load_active_jobs
from sam_server.db.models import JobEvent
from sam_server.db.session import engine_for, session_scope
from sam_server.scheduling import plan
from sam_server.scheduling.framework.profile import Profile
from sam_server.scheduling.profiles import usage_half_life_s
from sam_server.services import storage_gc
from sam_server.services.dispatch import charge_usage, mark_sent, unsent_messages
from sam_server.services.history import purge_ended
from sam_server.services.observe import expire_compile_servers

log = logging.getLogger("sam.scheduler")


@dataclass
class CycleStats:
    compiles: int = 0
    starts: int = 0
    preemptions: int = 0
    waiting: int = 0
    reaped: list[str] = field(default_factory=list)
    reused: int = 0
    seconds: float = 0.0
    # wafer id -> (free PEs, largest free rectangle's PEs, fragmentation) after the plan
    wafers: dict[str, tuple[int, int, float]] = field(default_factory=dict)


def scheduler_profile(settings: Settings) -> Profile:
    """The profile the live scheduler runs: `scheduler_profile` with `scheduler_plugin_args`
    (the minimum run and the bound on stops, `preempt_min_run_s` and `max_preemptions_per_job`,
    are the profile's `cycle` arguments unless those name them too)."""
    return settings.scheduler.profile()


THAW_EVERY_S = 60.0
"""How often the objects kept between cycles are handed back to the cyclic collector."""
_heap = {"thawed_at": 0.0}


def settle_heap() -> None:
    """Keep what survived this cycle out of the cyclic collector's full passes.

    Between cycles the loop keeps every active job's row and policy job (at 100,000 queued,
    millions of objects); a full collection walks them all (~0.3 s, at a moment nobody chose,
    often inside a cycle) and finds nothing: they are freed by reference counting when their
    job ends. `gc.freeze()` moves them to the permanent generation; once a minute they are
    thawed so a full pass can still reclaim any reference cycle among them."""
    now = time.monotonic()
    if now - _heap["thawed_at"] >= THAW_EVERY_S:
        gc.unfreeze()
        _heap["thawed_at"] = now
    else:
        gc.freeze()


def run_cycle(
    settings: Settings,
    *,
    profile: Profile | None = None,
    compile_servers: int | None = None,
) -> CycleStats:
    """One planning cycle, committed as one transaction. The scheduler process passes
    `compile_servers` (read from the cluster file once); otherwise the file is read here."""
    started = time.perf_counter()
    profile = profile or scheduler_profile(settings)
    cluster = settings.load_cluster()
    if compile_servers is None:
        compile_servers = cluster.compile_servers
    max_jobs = {w.id: w.max_jobs for w in cluster.wafers}
    stats = CycleStats()
    now = time.time()  # one instant for the snapshot and the plan
    try:
        _plan_and_apply(settings, profile, cluster, compile_servers, max_jobs, now, stats)
    except BaseException:
        forget_active_jobs()  # the cached rows may hold edits that were rolled back
        raise
    stats.seconds = time.perf_counter() - started
    settle_heap()
    return stats


def _plan_and_apply(  # noqa: PLR0913 - the cycle's inputs, passed through
    settings: Settings,
    profile: Profile,
    cluster: ClusterConfig,
    compile_servers: int,
    max_jobs: dict[str, int],
    now: float,
    stats: CycleStats,
) -> None:
    with session_scope(settings.resolved_database_url) as session:
        stats.reaped = reap_expired(session, max_attempts=settings.scheduler.max_attempts)
        expire_compile_servers(session, older_than_s=settings.scheduler.compile_server_expire_s)
        session.flush()
        jobs = load_active_jobs(session)
        stats.reused = reuse_compiled(session, jobs, limit=settings.api.bulk_chunk_rows)
        session.flush()
        charge_usage(session, jobs, half_life_s=usage_half_life_s(profile))
        # Held, dependent and array-limited jobs wait with a reason, unseen by the policy.
        gated = gate_jobs(session, jobs, kill_invalid_depend=settings.scheduler.kill_invalid_depend)
        snapshot = build_snapshot(
            session,
            jobs,
            now=now,
            half_life_s=usage_half_life_s(profile),
            compile_servers=compile_servers,
            stale_s=settings.worker.heartbeat_s * 3,
            max_jobs=max_jobs,
            slots_per_server=cluster.compile_slots,
            slots_per_tenant=settings.scheduler.compile_slots_per_tenant,
            gated=gated,
        )
        rows = {j.id: j for j in jobs}
        selection = ExplainSelection(rows, len(snapshot.jobs))
        decided = plan(snapshot, now, explain_only=selection, profile=profile)
        apply_plan(
            session,
            decided,
            rows,
            dispatch_timeout_s=settings.worker.lease_s * 2,
            selection=selection,
        )
        stats.compiles, stats.starts = len(decided.compiles), len(decided.starts)
        stats.preemptions, stats.waiting = len(decided.preemptions), len(decided.order)
        stats.wafers = {
            w: (m.free_pes, m.largest_free_rect[0] * m.largest_free_rect[1], m.fragmentation)
            for w, m in decided.wafer_metrics.items()
        }


def dispatch_outbox(settings: Settings, send: Sender) -> int:
    """Send every unsent outbox message with `send(task, queue, payload)`; returns how many."""
    sent = 0
    with session_scope(settings.resolved_database_url) as session:
        for message in unsent_messages(session):
            try:
                send(message.task, message.queue, message.payload)
            except Exception as exc:  # noqa: BLE001 - broker down: keep it for the next cycle
                log.warning(
                    "dispatch of %s to %s failed (%s); will retry", message.task, message.queue, exc
                )
                break
            mark_sent(session, message)
            sent += 1
    return sent


def purge_history(settings: Settings) -> int:
    """Retention: delete the logs and step metrics of jobs ended more than
    `history_retention_days` ago (in batches, until none is left); returns how many jobs."""
    if settings.scheduler.history_retention_days <= 0:
        return 0
    purged = 0
    while True:
        with session_scope(settings.resolved_database_url) as session:
            ids = purge_ended(
                session, older_than_s=settings.scheduler.history_retention_days * 86400
            )
        purged += len(ids)
        if not ids:
            return purged


def collect_storage(settings: Settings) -> None:
    """Free the project versions past their retention and the chunks nothing kept names
    (services/storage_gc.py), logging what each tenant got back."""
    with session_scope(settings.resolved_database_url) as session:
        for tenant, done in storage_gc.collect(settings, session).items():
            log.info(
                "storage: tenant %s: %d project versions dropped, %d chunks (%d bytes) freed",
                tenant,
                done.projects,
                done.chunks,
                done.freed_bytes,
            )


def _event_marker(session: Session) -> int:
    return int(session.execute(select(func.coalesce(func.max(JobEvent.id), 0))).scalar_one())


def run_scheduler(settings: Settings, *, interval: float, once: bool = False) -> None:
    """The scheduler process: lead (or wait to), then plan on every change and every `interval` s."""
    leader = Leadership(settings.resolved_database_url, settings.data_dir)
    send = celery_sender(settings)
    profile = scheduler_profile(settings)
    compile_servers = settings.load_cluster().compile_servers
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    signal.signal(signal.SIGINT, lambda *_: stopping.update(now=True))
    last_marker, last_cycle, last_purge, last_gc = -1, 0.0, 0.0, 0.0
    metrics = SchedulerMetrics(sessionmaker(engine_for(settings.resolved_database_url)))
    if settings.metrics.scheduler_metrics_port:
        metrics.serve(
            settings.metrics.scheduler_metrics_port,
            settings.metrics.metrics_host,
            token=settings.metrics.metrics_token,
        )
    while not stopping["now"]:
        if not leader.try_acquire():
            time.sleep(1.0)
            continue
        try:
            with session_scope(settings.resolved_database_url) as session:
                marker = _event_marker(session)
            if marker != last_marker or time.monotonic() - last_cycle >= interval:
                stats = run_cycle(settings, profile=profile, compile_servers=compile_servers)
                last_marker, last_cycle = marker, time.monotonic()
                metrics.observe(stats)
                if stats.compiles or stats.starts or stats.preemptions or stats.reaped:
                    log.info(
                        "cycle: %d compiles, %d starts, %d preemptions, %d waiting, "
                        "%d requeued (%.3fs)",
                        stats.compiles,
                        stats.starts,
                        stats.preemptions,
                        stats.waiting,
                        len(stats.reaped),
                        stats.seconds,
                    )
            dispatch_outbox(settings, send)
            if time.monotonic() - last_purge >= settings.scheduler.history_purge_every_s:
                last_purge = time.monotonic()
                if purged := purge_history(settings):
                    log.info("retention: purged the logs and metrics of %d ended jobs", purged)
            if time.monotonic() - last_gc >= settings.storage.storage_gc_every_s:
                last_gc = time.monotonic()
                collect_storage(settings)
        except Exception:  # noqa: BLE001 - a cycle failure (database restarting) is retried
            log.exception("scheduling cycle failed; retrying")
            time.sleep(1.0)
        if once:
            break
        time.sleep(0.05)
    leader.release()
