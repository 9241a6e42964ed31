"""`sam worker compile|wafer`, `sam up` and `sam demo` (plugged into the `sam` CLI)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])  # a click command function, decorated in place


def _logging() -> None:
    from sam_server.config import get_settings

    level = get_settings().log_level
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # `sam up` and `sam demo` upgrade a SQLite database on every start: Alembic's INFO lines
    # (every plugin, every migration) would be most of what a newcomer reads.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _probe_sandbox() -> None:
    """Hand the sandbox its settings, and log what it provides on this worker (or what it lacks:
    tenant code is then refused job by job, and the worker keeps serving)."""
    from compiler.sandbox import probe
    from compiler.sandbox.options import configure
    from sam_server.config import get_settings

    configure(get_settings().sandbox.options())

    found = probe()
    log = logging.getLogger("sam.worker.sandbox")
    if found["ok"] and found["uid"] != "pool":
        log.warning(
            "tenant code sandbox ready, but SHARING THIS WORKER'S UID %d (sandbox.allow_shared_uid"
            " is set): tenant code can signal, ptrace and read this worker; %s",
            os.geteuid(),
            found,
        )
    elif found["ok"]:
        log.info("tenant code sandbox ready: %s", found)
    else:
        log.error("tenant code sandbox UNAVAILABLE, tenant code will be refused: %s", found)


def _require_sandbox() -> None:
    """`sam up` and `sam demo` start nothing where the workers would refuse every job's tenant
    code (no bubblewrap, a non-root user without sandbox.allow_shared_uid, ...): one line says
    what is missing and what to do."""
    import dataclasses

    from compiler.sandbox import probe
    from compiler.sandbox.options import configure
    from sam_server.config import get_settings

    options = get_settings().sandbox.options()
    # Forked from this small process: no spawner helper left waiting beside the cluster.
    configure(dataclasses.replace(options, spawner=False, warm=False))
    try:
        found = probe()
    finally:
        configure(options)
    if not found["ok"]:
        reason = found.get("reason") or f"the sandbox lacks {found['missing']}"
        raise click.ClickException(
            f"SAM cannot sandbox tenant code here, so every job would fail: {reason} "
            "(docs/sandbox.md)"
        )
    if found["uid"] != "pool":
        click.echo(
            f"warning: tenant code will run under your uid {os.geteuid()} "
            "(sandbox.allow_shared_uid): it can signal, ptrace and read SAM's processes",
            err=True,
        )


@click.group("worker")
def worker() -> None:
    """Run a Celery worker: a compile server or the worker of one wafer."""


def _celery_argv(queue: str, concurrency: int, name: str) -> list[str]:
    from sam_server.config import get_settings

    return [
        "worker",
        "-Q",
        queue,
        "--pool",
        "threads",
        "-c",
        str(concurrency),
        "-n",
        name,
        "--loglevel",
        get_settings().log_level,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def _metrics_option(envvar: str) -> Callable[[F], F]:
    return click.option(
        "--metrics-port",
        default=0,
        type=click.IntRange(0, 65535),
        envvar=envvar,
        show_default=True,
        help="serve this process's Prometheus /metrics on this port (0 = off)",
    )


def _concurrency_option(envvar: str, help: str) -> Callable[[F], F]:
    return click.option(
        "--concurrency", default=None, type=click.IntRange(min=1), envvar=envvar, help=help
    )


@worker.command("compile")
@_concurrency_option(
    "SAM_COMPILE_CONCURRENCY", "compiles run at once (default: compile_slots in the cluster file)"
)
@_metrics_option("SAM_COMPILE_METRICS_PORT")
def worker_compile(concurrency: int | None, metrics_port: int) -> None:
    """A compile server: consumes the `compile` queue, `concurrency` compiles at once."""
    from sam_server.broker import COMPILE_QUEUE
    from sam_server.config import get_settings
    from sam_worker.celery_app import get_celery
    from sam_worker.compile_server import serve_metrics, set_slots, start_heartbeat

    _logging()
    settings = get_settings()
    if concurrency is None:
        concurrency = settings.load_cluster().compile_slots
    set_slots(concurrency)
    if metrics_port:
        serve_metrics(metrics_port, settings.metrics.metrics_host)
    start_heartbeat()
    _probe_sandbox()
    from compiler.sandbox import warm_sandbox

    warm_sandbox()  # the first trace should not wait for the torch import
    from sam_worker.recycle import install

    install(settings.worker.worker_recycle_rss_bytes)
    name = f"compile-{os.getpid()}@{socket.gethostname()}"
    get_celery().worker_main(_celery_argv(COMPILE_QUEUE, concurrency, name))


@worker.command("wafer")
@click.option(
    "--wafer", "wafer_id", required=True, envvar="SAM_WORKER_WAFER", help="wafer id (cluster file)"
)
@_concurrency_option(
    "SAM_WAFER_CONCURRENCY",
    "jobs run at once on this wafer (default: the wafer's max_jobs in the cluster file)",
)
@_metrics_option("SAM_WAFER_METRICS_PORT")
def worker_wafer(wafer_id: str, concurrency: int | None, metrics_port: int) -> None:
    """The worker of one simulated wafer: consumes the `wafer.<ID>` queue."""
    if concurrency is None:  # as many threads as regions the policy may place on the wafer
        concurrency = _wafer_slots(wafer_id)
    from sam_server.broker import wafer_queue
    from sam_server.config import get_settings
    from sam_worker.celery_app import get_celery
    from sam_worker.wafer_host import start_host

    _logging()
    _probe_sandbox()
    settings = get_settings()
    wafer = start_host(wafer_id, settings)
    wafer.slots = concurrency
    if metrics_port:
        wafer.serve_metrics(metrics_port, settings.metrics.metrics_host)
    wafer.beat()
    wafer.start_heartbeat()
    wafer.memory.budget = _bound_wafer_memory(concurrency)
    name = f"wafer-{wafer_id}-{os.getpid()}@{socket.gethostname()}"
    get_celery().worker_main(_celery_argv(wafer_queue(wafer_id), concurrency, name))


def _bound_wafer_memory(slots: int) -> int:
    """RLIMIT_DATA for this wafer worker and its recycling (`sam_worker.recycle`); the bytes its
    jobs may plan to hold together (`sam_worker.host_memory`)."""
    from sam_server.config import get_settings
    from sam_worker.recycle import install, jobs_share, limit_data, wafer_worker_memory_bytes

    settings = get_settings()
    limit = wafer_worker_memory_bytes(
        settings.worker.wafer_worker_memory_bytes, slots, settings.worker.wafer_job_memory_bytes
    )
    in_force = limit_data(limit)
    budget = jobs_share(in_force)
    logging.getLogger("sam.worker.wafer").info(
        "wafer worker memory: RLIMIT_DATA %.1f GiB, %.1f GiB of it for its jobs' planned steps",
        in_force / 2**30,
        budget / 2**30,
    )
    install(settings.worker.worker_recycle_rss_bytes)
    return budget


def _wafer_slots(wafer_id: str) -> int:
    from sam_server.config import get_settings

    for wafer in get_settings().load_cluster().wafers:
        if wafer.id == wafer_id:
            return wafer.max_jobs
    raise click.BadParameter(
        f"wafer {wafer_id!r} is not in the cluster file; add it there or pass --concurrency",
        param_hint="--wafer",
    )


@click.command("up")
@click.option("--host", default="127.0.0.1", envvar="SAM_HOST", show_default=True)
@click.option("--port", default=8000, type=int, envvar="SAM_PORT", show_default=True)
def up(host: str, port: int) -> None:
    """The whole cluster on this machine, in the foreground (SQLite, no Redis needed by default)."""
    from sam_server.config import get_settings
    from sam_worker.supervisor import Cluster, PortInUse

    _logging()
    _require_sandbox()
    settings = get_settings()
    cluster = Cluster(settings, host=host, port=port)
    try:
        cluster.start()
    except PortInUse as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        cluster.wait_ready()
        token_file = settings.data_dir.resolve() / "admin.token"
        click.echo(f"SAM is up at {cluster.url}  (docs: {cluster.url}/docs)", err=True)
        click.echo(f"admin token: SAM_ADMIN_TOKEN or {token_file}", err=True)
        click.echo(
            f"try:  export SAM_URL={cluster.url} SAM_TOKEN=$(cat {token_file}); sam cluster",
            err=True,
        )
        while not stop.is_set():
            cluster.watch()
            stop.wait(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("stopping the cluster...", err=True)
        cluster.stop()


@click.command("demo")
@click.option("--keep", is_flag=True, help="leave the cluster running after the tour")
@click.option("--port", default=8000, type=int, envvar="SAM_PORT", show_default=True)
def demo(keep: bool, port: int) -> None:
    """`sam up` plus a tour: tenants, jobs of several priorities sharing a wafer, their results."""
    from sam_worker.demo import run_demo
    from sam_worker.supervisor import PortInUse

    _logging()
    _require_sandbox()
    try:
        ok = run_demo(port=port, keep=keep)
    except PortInUse as exc:
        raise click.ClickException(str(exc)) from None
    if keep and ok:
        while True:
            time.sleep(3600)
    raise SystemExit(0 if ok else 1)
