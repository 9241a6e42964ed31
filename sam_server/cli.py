"""Server-side `sam` subcommands: `sam server`, `sam scheduler`, `sam db upgrade`.

They plug into the client's `sam` command through the `sam.commands` entry points. Every flag
is mirrored by a `SAM_` environment variable.
"""

from __future__ import annotations

import logging
import os

import click


def _configure_logging() -> None:
    from sam_server.config import get_settings

    level = get_settings().log_level
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)


@click.command("server")
@click.option("--host", default="127.0.0.1", envvar="SAM_HOST", show_default=True)
@click.option("--port", default=8000, type=int, envvar="SAM_PORT", show_default=True)
@click.option(
    "--workers",
    default=1,
    type=int,
    envvar="SAM_SERVER_WORKERS",
    show_default=True,
    help="uvicorn worker processes",
)
def server(host: str, port: int, workers: int) -> None:
    """Run the control plane (REST API). On SQLite it creates or upgrades the database itself."""
    import uvicorn

    from sam_server.app import create_app
    from sam_server.config import get_settings

    _configure_logging()
    settings = get_settings()
    create_app(settings)  # prepare the database once, before any worker starts
    click.echo(
        f"SAM control plane on http://{host}:{port}  (docs: http://{host}:{port}/docs)", err=True
    )
    click.echo(f"database: {settings.shown_database_url}", err=True)
    # Log followers end at SIGTERM (a `shutdown` event; they resume elsewhere); anything else
    # still open gets this long before the process exits anyway.
    drain_s = 5
    if workers > 1:
        _share_prometheus_dir()
        uvicorn.run(
            "sam_server.asgi:app",
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            timeout_graceful_shutdown=drain_s,
        )
    else:
        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=drain_s,
        )


def _share_prometheus_dir() -> None:
    """Several server processes: their metrics go to one fresh folder that every `/metrics`
    sums (prometheus_client multiprocess mode); a folder given in PROMETHEUS_MULTIPROC_DIR is
    emptied of a previous run's files first."""
    import glob
    import tempfile

    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        for stale in glob.glob(os.path.join(folder, "*.db")):
            os.remove(stale)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="sam-prometheus-")


@click.command("scheduler")
@click.option("--interval", default=None, type=float, help="seconds between timer-driven cycles")
@click.option("--once", is_flag=True, help="run one planning cycle and exit")
def scheduler(interval: float | None, once: bool) -> None:
    """Run the scheduler loop: snapshot, plan, write decisions, dispatch (one leader at a time)."""
    from sam_server.config import get_settings
    from sam_server.controller.loop import run_scheduler

    _configure_logging()
    settings = get_settings()
    run_scheduler(settings, interval=interval or settings.scheduler.scheduler_interval_s, once=once)


@click.group("db")
def db() -> None:
    """Database administration."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema to the newest migration (run before `sam server` on Postgres)."""
    from sam_server.config import get_settings
    from sam_server.db.session import upgrade_database

    settings = get_settings()
    url = settings.resolved_database_url
    if url.startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade_database(url)
    click.echo(f"database upgraded: {settings.shown_database_url}", err=True)


SECRETS = {"admin_token"}  # shown as *** (a URL's password is shown as *** too)


@click.command("show")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per setting, one a line")
def config_show(as_json: bool) -> None:
    """Every effective server setting of this machine and where it came from: the environment
    variable that set it, the settings file (SAM_SETTINGS_FILE), or the default."""
    import json

    from sam_server.config import get_settings, origins, redact_url
    from sam_server.errors import ConfigError

    try:
        found = origins(get_settings())
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    rows = []
    for name, value, source in found:
        shown = "unset" if value is None else str(value)
        if value is not None and name in SECRETS:
            shown = "***"
        elif isinstance(value, str) and "://" in value:
            shown = redact_url(value)
        rows.append((name, shown, source))
    if as_json:
        for name, shown, source in rows:
            click.echo(json.dumps({"setting": name, "value": shown, "source": source}))
        return
    width = max(len(name) for name, _, _ in rows)
    value_width = min(40, max(len(shown) for _, shown, _ in rows))
    click.echo(f"{'SETTING':<{width}}  {'VALUE':<{value_width}}  SOURCE")
    for name, shown, source in rows:
        click.echo(f"{name:<{width}}  {shown:<{value_width}}  {source}")
