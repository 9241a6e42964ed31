"""The monitoring that ships in deploy/: Prometheus' configuration and recording rules pass
promtool, and every series the Grafana dashboard draws is one SAM really exports: checked by
name against a scrape of a real server and scheduler, and by running each panel's query in a
real Prometheus that scrapes them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.api.helpers import ADMIN, make_tenant, make_user, submit
from tests.conftest import ADMIN_TOKEN, LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "sam.json"
RULES = PROMETHEUS_DIR / "rules" / "sam.rules.yml"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # .ci/run installs Debian's `prometheus` package, which brings both
        pytest.fail(f"{name} is not installed: apt-get install prometheus")
    return path


def _dashboard() -> dict:  # type: ignore[type-arg]
    return json.loads(DASHBOARD.read_text())


def _panels() -> list[dict]:  # type: ignore[type-arg]
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def _dashboard_queries() -> list[str]:
    return [t["expr"] for p in _panels() for t in p["targets"]]


def _rules() -> list[dict]:  # type: ignore[type-arg]
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def as_prometheus_runs_it(expr: str) -> str:
    """A panel's query with Grafana's variables as the dashboard's defaults resolve them."""
    return expr.replace("$__rate_interval", "1m").replace("$tenant", ".*")


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
_KEYWORDS |= {"unless", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads (functions, keywords, labels, strings and
    durations removed)."""
    text = re.sub(r'"[^"]*"|\'[^\']*\'', "", as_prometheus_runs_it(expr))
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group() in _KEYWORDS:
            continue  # a function or an aggregation, or a keyword
        names.add(match.group())
    return names


def test_metric_names_reads_promql_as_prometheus_does() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, route) (rate(x_bucket{route=~"$tenant"}'
        "[$__rate_interval]))) / on (wafer) group_left max by (wafer) (y:z) + 60 * w_total"
    )
    assert metric_names(expr) == {"x_bucket", "y:z", "w_total"}


# Where compose mounts the scrape token for Prometheus (its `secrets:`).
COMPOSE_SECRET = "/run/secrets/sam_metrics_token"
SCRAPE_TOKEN = "sam_scrape_monitoring_test_token_0123"
SCRAPE = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}


def test_promtool_accepts_the_configuration_and_its_rule_files(tmp_path: Path) -> None:
    # promtool checks that the credentials file exists: the same tree, the compose secret's
    # path pointed at a file here.
    shutil.copytree(PROMETHEUS_DIR, tmp_path / "prometheus")
    config = tmp_path / "prometheus" / "prometheus.yml"
    text = config.read_text()
    assert text.count(f"credentials_file: {COMPOSE_SECRET}") == 2  # the API and the scheduler
    (tmp_path / "token").write_text(SCRAPE_TOKEN)
    config.write_text(text.replace(COMPOSE_SECRET, str(tmp_path / "token")))
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["prometheus"]["secrets"] == ["sam_metrics_token"]
    assert compose["secrets"]["sam_metrics_token"] == {"environment": "SAM_METRICS_TOKEN"}
    result = subprocess.run(
        [_tool("promtool"), "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rule files found" in result.stdout + result.stderr  # the rules were read too


def test_the_recording_rules_compute_what_their_tests_expect() -> None:
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", "sam.rules.test.yml"],
        cwd=PROMETHEUS_DIR / "rules",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_dashboard_is_wired_to_the_provisioned_data_source() -> None:
    datasources = yaml.safe_load(
        (GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )["datasources"]
    (source,) = datasources
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    provider = yaml.safe_load(
        (GRAFANA_DIR / "provisioning" / "dashboards" / "sam.yml").read_text()
    )["providers"][0]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    mounts = compose["grafana"]["volumes"]
    assert f"./deploy/grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./deploy/prometheus:/etc/prometheus:ro" in compose["prometheus"]["volumes"]

    dashboard = _dashboard()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"].lower() for p in _panels())
    for topic in ("occupancy", "queue depth", "wait", "compiles", "steps", "latency"):
        assert topic in titles, f"the dashboard has no {topic} panel"
    for panel in _panels():
        assert panel["datasource"]["uid"] == source["uid"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == source["uid"]


def _exposed_names(text: str) -> set[str]:
    """Every series name a Prometheus text exposition offers (a histogram's _bucket, _sum and
    _count even before its first observation)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite: the metrics are the same aggregate queries on PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.fixture
def settings(db_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    from sam_server.config import Settings

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "wafers:\n"
        "  - {id: small-0, arch: wse2, rows: 64, cols: 64}\n"
        "  - {id: small-1, arch: wse2, rows: 32, cols: 32}\n"
        "compile_servers: 1\n"
    )
    return Settings(
        data_dir=tmp_path / "data",
        database_url=db_url,
        admin_token=ADMIN_TOKEN,
        cluster=cluster,
        metrics_token=SCRAPE_TOKEN,
    )


class Cluster:
    """A live SAM API and the scheduler's metrics endpoint, with a little going on: one job
    running on small-0 in an 8 x 8 region, one waiting, a compile server with 5 compiles."""

    def __init__(self, settings, server: LiveServer) -> None:  # type: ignore[no-untyped-def]
        from sqlalchemy.orm import sessionmaker

        from sam_server.controller.metrics import SchedulerMetrics
        from sam_server.db.session import engine_for

        self.settings, self.api = settings, server
        self.url = settings.resolved_database_url
        self.scheduler_port = free_port()
        sessions = sessionmaker(engine_for(self.url), expire_on_commit=False)
        self.scheduler = SchedulerMetrics(sessions)
        self.scheduler.serve(self.scheduler_port, token=SCRAPE_TOKEN)
        with httpx.Client(base_url=server.url) as client:
            make_tenant(client, "acme")
            alice = make_user(client, "acme", "alice")
            self.running = submit(client, alice).json()["id"]
            self.waiting = submit(client, alice).json()["id"]
            assert client.get("/api/v1/jobs", headers=ADMIN).status_code == 200
        self._start_running_job()
        self.heartbeat()

    def _start_running_job(self) -> None:
        from sam_server.db.models import Job
        from sam_server.db.session import session_scope
        from sam_server.services.transitions import transition

        with session_scope(self.url) as s:
            job = s.get(Job, self.running)
            for state in ("compiling", "pending", "running"):
                transition(s, job, state)
            job.wafer_id, job.region_row, job.region_col = "small-0", 0, 0
            job.region_rows, job.region_cols, job.progress_step = 8, 8, 120

    def heartbeat(self) -> None:
        """small-0 and a compile server are alive; small-1 has no worker."""
        from sam_server.db.session import session_scope
        from sam_server.services import lifecycle

        with session_scope(self.url) as s:
            lifecycle.heartbeat_wafer(
                s, wafer_id="small-0", worker="w0", arch="wse2", rows=64, cols=64
            )
            lifecycle.heartbeat_compile_server(
                s, server_id="compile-a", busy=1, compiles=5, cache_hits=2
            )


@pytest.fixture
def cluster(settings) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    with LiveServer(settings) as server:
        yield Cluster(settings, server)


def test_every_series_the_dashboard_reads_is_exported_by_sam(cluster: Cluster) -> None:
    api = httpx.get(f"{cluster.api.url}/metrics", headers=SCRAPE).text
    scheduler = httpx.get(f"http://127.0.0.1:{cluster.scheduler_port}/metrics", headers=SCRAPE).text
    exported = _exposed_names(api) | _exposed_names(scheduler)
    recorded = {r["record"] for r in _rules()}
    read_by_rules = set().union(*(metric_names(r["expr"]) for r in _rules()))
    read_by_panels = set().union(*(metric_names(q) for q in _dashboard_queries()))
    unknown_in_rules = read_by_rules - exported - recorded
    assert not unknown_in_rules, (
        f"the recording rules read series SAM does not export: {unknown_in_rules}"
    )
    unknown = read_by_panels - exported - recorded
    assert not unknown, f"the dashboard reads series SAM does not export: {unknown}"
    assert read_by_panels & recorded and read_by_panels & exported  # both kinds are used


@pytest.fixture
def prometheus(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus (Debian's) scraping the live API and scheduler every second with the
    scrape token from a file (as compose gives it), with the repository's recording rules; its
    base URL."""
    port = free_port()
    (tmp_path / "token").write_text(SCRAPE_TOKEN + "\n")
    token = {"credentials_file": str(tmp_path / "token")}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "sam-api",
                "authorization": token,
                "static_configs": [{"targets": [f"127.0.0.1:{cluster.api.port}"]}],
            },
            {
                "job_name": "sam-scheduler",
                "authorization": token,
                "static_configs": [{"targets": [f"127.0.0.1:{cluster.scheduler_port}"]}],
            },
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            _tool("prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                if httpx.get(f"{base}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not become ready"
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def _query(base: str, expr: str) -> list[dict]:  # type: ignore[type-arg]
    answer = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", f"{expr}: {answer.get('error')}"
    return answer["data"]["result"]


def _wait_for(base: str, expr: str, timeout_s: float = 40) -> list[dict]:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout_s
    while True:
        result = _query(base, expr)
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_every_panel_query_runs_in_a_real_prometheus_scraping_sam(
    cluster: Cluster, prometheus: str
) -> None:
    up = _wait_for(prometheus, "sum(up) == 2")
    assert up, _query(prometheus, "up")
    cluster.heartbeat()
    occupancy = _wait_for(prometheus, 'sam:wafer_occupancy:ratio{wafer="small-0"}')
    assert float(occupancy[0]["value"][1]) == pytest.approx(64 / 4096)
    # small-1 has no worker: the cluster's occupancy counts only small-0's PEs
    cluster_occupancy = _wait_for(prometheus, "sam:cluster_occupancy:ratio")
    assert float(cluster_occupancy[0]["value"][1]) == pytest.approx(64 / 4096)
    depth = _wait_for(prometheus, 'sam:queue_depth:by_tenant{tenant="acme"}')
    assert float(depth[0]["value"][1]) == 1
    held = _wait_for(prometheus, 'sam:tenant_allocated_pes:sum{tenant="acme"}')
    assert float(held[0]["value"][1]) == 64

    empty = []
    for panel in _panels():
        for target in panel["targets"]:
            if not _query(prometheus, as_prometheus_runs_it(target["expr"])):
                empty.append(f"{panel['title']}: {target['expr']}")
    # Rates need two scrapes of a change; everything the fixture set up must show.
    for must_show in ("Cluster occupancy", "Occupancy per wafer", "PEs held by tenant"):
        assert not [e for e in empty if e.startswith(must_show + ":")], empty
    for must_show in ("Queue depth by tenant", "Longest wait by tenant", "Jobs by state"):
        assert not [e for e in empty if e.startswith(must_show + ":")], empty
    assert not [e for e in empty if "API latency" in e], empty
