"""An in-memory SAM API (docs/contract.md section 2) behind httpx.MockTransport, for client unit tests.

It implements the same interface as the real server, small: enough state for the CLI's calls.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

TERMINAL = {"succeeded", "failed", "cancelled"}
WAITING = ("queued", "compiling", "pending")
# GET /jobs?view=slim's columns (sam_server.schemas.listing.SLIM_COLUMNS)
SLIM_COLUMNS = (
    "id name tenant user state priority mode created_at started_at finished_at attempts reason "
    "hold region step total_steps loss error_kind array_job_id array_task_id summary"
).split()
ADMIN_TOKEN = "admin-secret"
USER_TOKEN = "alice-secret"


def problem(
    status: int, title: str, detail: str, errors: list[dict[str, str]] | None = None
) -> httpx.Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


@dataclass
class FakeSam:
    """State of the fake server plus a log of the requests it saw."""

    principals: dict[str, dict[str, str]] = field(
        default_factory=lambda: {
            ADMIN_TOKEN: {"name": "admin", "tenant": "system", "role": "admin"},
            USER_TOKEN: {"name": "alice", "tenant": "acme", "role": "user"},
        }
    )
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    log_lines: dict[int, list[str]] = field(default_factory=dict)
    final_state: dict[int, str] = field(default_factory=dict)
    idempotency: dict[str, int] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)
    queue_reasons: dict[int, list[dict[str, str]]] = field(default_factory=dict)
    explain_priority: dict[str, Any] | None = None  # the real server puts the breakdown here
    fail_next_connects: int = 0
    sse_supported: bool = True
    page_size_cap: int = 500
    chunks: dict[str, dict[str, bytes]] = field(default_factory=dict)  # tenant -> sha -> bytes
    projects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # digest -> rows
    chunk_bytes: int = 8 << 20
    slim_supported: bool = True  # False: a server from before GET /jobs?view=slim
    reply_delay_s: float = 0.0  # a slow server: each answer waits this long

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def add_job(self, **fields: Any) -> dict[str, Any]:
        job_id = len(self.jobs) + 1
        job = {
            "id": job_id,
            "name": f"job-{job_id}",
            "tenant": "acme",
            "user": "alice",
            "state": "queued",
            "priority": "normal",
            "mode": "train",
            "created_at": "2026-01-01T00:00:00Z",
            "started_at": None,
            "finished_at": None,
            "attempts": 0,
            "reason": None,
            "region": None,
            "progress": {"step": None, "total_steps": 100, "loss": None},
            "error": None,
            "compile": None,
        }
        job.update(fields)
        self.jobs[job_id] = job
        return job

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.reply_delay_s:
            timeout = (request.extensions.get("timeout") or {}).get("read")
            if timeout is not None and timeout < self.reply_delay_s:
                time.sleep(timeout)
                raise httpx.ReadTimeout("timed out", request=request)
            time.sleep(self.reply_delay_s)
        if self.fail_next_connects > 0:
            self.fail_next_connects -= 1
            raise httpx.ConnectError("connection refused", request=request)
        me = self.principals.get(request.headers.get("authorization", "").removeprefix("Bearer "))
        if me is None:
            return problem(401, "Unauthorized", "a valid bearer token is required")
        parts = request.url.path.removeprefix("/api/v1/").strip("/").split("/")
        route = getattr(self, f"_{request.method.lower()}_{parts[0]}", None)
        if route is None:
            return problem(404, "Not Found", f"no route {request.url.path}")
        return route(request, me, parts[1:])

    def _visible_job(self, me: dict[str, str], job_id: str) -> dict[str, Any] | None:
        job = self.jobs.get(int(job_id)) if job_id.isdigit() else None
        if job is None or (me["role"] != "admin" and job["tenant"] != me["tenant"]):
            return None
        return job

    # -- jobs ----------------------------------------------------------------------------

    def _post_jobs(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        if rest:
            job = self._visible_job(me, rest[0])
            if job is None:
                return problem(404, "Not Found", f"job {rest[0]} not found")
            if job["state"] in TERMINAL:
                return problem(409, "Conflict", f"job {rest[0]} already {job['state']}")
            job["state"] = "cancelling" if job["state"] == "running" else "cancelled"
            return httpx.Response(202, json=job)
        body = json.loads(request.content)
        spec, files = body["spec"], body.get("files", {})
        model_file = (spec.get("model") or {}).get("file")
        if "name" not in spec or (model_file and model_file not in files):
            errors = [{"field": "name", "message": "field required"}] if "name" not in spec else []
            if model_file and model_file not in files:
                errors.append({"field": "model.file", "message": f"{model_file} was not uploaded"})
            return problem(422, "Invalid job spec", "the job spec has errors", errors)
        if request.url.params.get("dry_run") == "true":
            normalized = {"priority": "normal", "mode": "train", **spec}
            return httpx.Response(
                200, json={"valid": True, "spec": normalized, "region": {"rows": 64, "cols": 64}}
            )
        key = request.headers.get("idempotency-key")
        if key in self.idempotency:
            return httpx.Response(200, json=self.jobs[self.idempotency[key]])
        job = self.add_job(name=spec["name"], tenant=me["tenant"], user=me["name"])
        if key:
            self.idempotency[key] = job["id"]
        return httpx.Response(201, json=job, headers={"Location": f"/api/v1/jobs/{job['id']}"})

    def _get_jobs(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        if rest:
            return self._job_resource(request, me, rest)
        params = request.url.params
        states = params.get_list("state")
        wanted = params.get_list("job")
        items = [
            j
            for _, j in sorted(self.jobs.items(), reverse=True)  # newest first
            if (me["role"] == "admin" or j["tenant"] == me["tenant"])
            and (not states or j["state"] in states)
            and (not params.get("user") or j["user"] == params["user"])
            and (not wanted or str(j["id"]) in wanted or j.get("array_job_id") in wanted)
        ]
        if params.get("arrays") != "expand":
            items = collapse(items)
        limit = min(int(params.get("limit", 50)), self.page_size_cap)
        start = int(params.get("cursor") or 0)
        page = items[start : start + limit]
        more = start + limit < len(items)
        cursor = str(start + limit) if more else None
        if params.get("view") == "slim":
            if not self.slim_supported:
                return problem(422, "Invalid request", "limit: at most 500")
            rows = [slim_row(job) for job in page]
            return httpx.Response(
                200, json={"columns": list(SLIM_COLUMNS), "rows": rows, "next_cursor": cursor}
            )
        return httpx.Response(200, json={"items": page, "next_cursor": cursor})

    def _job_resource(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        job = self._visible_job(me, rest[0])
        if job is None:
            return problem(404, "Not Found", f"job {rest[0]} not found")
        sub = rest[1] if len(rest) > 1 else ""
        if sub == "":
            return httpx.Response(200, json=job)
        if sub == "logs":
            return self._logs(request, job)
        if sub == "explain":
            return httpx.Response(
                200,
                json={
                    "state": job["state"],
                    "position": 2,
                    "eta": "2099-01-01T01:00:00Z",
                    "reasons": [
                        {"code": "Resources", "message": "no wafer has a free 64x64 region"},
                        {"code": "QuotaPEs", "message": "tenant acme holds 4096 of 4096 PEs"},
                    ],
                    **({"priority": self.explain_priority} if self.explain_priority else {}),
                },
            )
        if sub == "metrics":
            steps = [
                {"step": k, "loss": 2.0 - 0.5 * k, "sim_cycles": 1000 + k, "samples_per_sec": 5e4}
                for k in range(3)
            ]
            return httpx.Response(
                200, json={"job_id": job["id"], "steps": steps, "total_steps": 3, "final_loss": 1.0}
            )
        if sub == "report":
            run = {
                "samples_per_sec": 5e4,
                "utilization": [[0.5, 1.0], [0.0, 0.5]],
                "sram_bytes": [100, 300],
            }
            return httpx.Response(
                200,
                json={
                    "job_id": job["id"],
                    "state": job["state"],
                    "compile": {"seconds": 1.5},
                    "run": run,
                },
            )
        return problem(404, "Not Found", f"no route {request.url.path}")

    def _logs(self, request: httpx.Request, job: dict[str, Any]) -> httpx.Response:
        lines = self.log_lines.get(job["id"], [])
        if "text/event-stream" not in request.headers.get("accept", "") or not self.sse_supported:
            return httpx.Response(200, text="".join(f"{line}\n" for line in lines))
        final = self.final_state.get(job["id"], job["state"])
        job["state"] = final
        events = "".join(f"event: log\ndata: {line}\n\n" for line in lines)
        events += ": keep-alive\n\n" + f"event: end\ndata: {json.dumps({'state': final})}\n\n"
        return httpx.Response(200, text=events, headers={"content-type": "text/event-stream"})

    # -- queue, cluster, identity, tenants -----------------------------------------------

    def _get_queue(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        waiting = [
            j for j in self.jobs.values() if j["state"] in ("queued", "compiling", "pending")
        ]
        items = [
            {
                **j,
                "position": n + 1,
                "priority": {"total": 1.5, "factors": {"age": 0.5, "class": 1.0}},
                "reasons": self.queue_reasons.get(j["id"], []),
                "eta": None,
            }
            for n, j in enumerate(waiting)
        ]
        return httpx.Response(200, json={"items": items})

    def _get_cluster(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        wafer = {
            "id": "small-0",
            "arch": "wse2",
            "rows": 64,
            "cols": 64,
            "state": "up",
            "free_pes": 64 * 64 - 32 * 64,
            "allocations": [
                {"job_id": 1, "tenant": "acme", "row": 0, "col": 0, "rows": 32, "cols": 64}
            ],
        }
        return httpx.Response(
            200, json={"wafers": [wafer], "compile_servers": [{"id": "c0", "busy": 0}]}
        )

    def _get_whoami(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        return httpx.Response(200, json=me)

    def _post_tenants(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        if me["role"] != "admin":
            return problem(403, "Forbidden", "admin only")
        body = json.loads(request.content)
        if rest:  # POST /tenants/{name}/users
            token = f"tok-{body['name']}"
            self.principals[token] = {"name": body["name"], "tenant": rest[0], "role": body["role"]}
            return httpx.Response(201, json={**self.principals[token], "token": token})
        if body["name"] in self.tenants:
            return problem(409, "Conflict", f"tenant {body['name']} exists")
        self.tenants[body["name"]] = {
            "name": body["name"],
            "quota": body["quota"],
            "usage": {"pes": 0},
        }
        return httpx.Response(201, json=self.tenants[body["name"]])

    # -- uploads (the real protocol: services/uploads.py) --------------------------------

    def _post_uploads(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        have = self.chunks.setdefault(me["tenant"], {})
        wanted = [c["sha256"] for c in json.loads(request.content)["chunks"]]
        missing = [c for c in wanted if c not in have]
        body = {"missing": missing, "missing_bytes": 0, "chunk_bytes": self.chunk_bytes}
        return httpx.Response(200, json=body)

    def _put_uploads(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        digest = rest[1]
        if hashlib.sha256(request.content).hexdigest() != digest:
            return problem(422, "Invalid job spec", "the chunk's SHA-256 does not match")
        self.chunks.setdefault(me["tenant"], {})[digest] = request.content
        return httpx.Response(200, json={"sha256": digest, "stored": True})

    def _post_projects(
        self, request: httpx.Request, me: dict[str, str], rest: list[str]
    ) -> httpx.Response:
        rows = json.loads(request.content)["files"]
        have = self.chunks.get(me["tenant"], {})
        for row in rows:
            if any(c not in have for c in row["chunks"]):
                return problem(422, "Invalid job spec", f"{row['path']}: chunks not uploaded")
            content = b"".join(have[c] for c in row["chunks"])
            if hashlib.sha256(content).hexdigest() != row["sha256"]:
                return problem(422, "Invalid job spec", f"{row['path']}: wrong SHA-256")
        rows = sorted(rows, key=lambda r: r["path"])
        digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
        self.projects[digest] = rows
        body = {"digest": digest, "files": len(rows), "bytes": sum(r["size"] for r in rows)}
        return httpx.Response(201, json=body)

    def job_posts(self) -> list[httpx.Request]:
        """The requests that submitted (or validated) a job, in order."""
        return [r for r in self.requests if r.url.path == "/api/v1/jobs" and r.method == "POST"]

    def project_files(self, digest: str, tenant: str = "acme") -> dict[str, bytes]:
        """{path: content} of a committed project."""
        have = self.chunks[tenant]
        return {r["path"]: b"".join(have[c] for c in r["chunks"]) for r in self.projects[digest]}


def collapse(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server's default listing: each array's waiting tasks as one row (`summary`)."""
    rows: list[dict[str, Any]] = []
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for job in items:
        array_id = job.get("array_job_id")
        if not array_id or job["state"] not in WAITING:
            rows.append(job)
        elif array_id in groups:
            groups[array_id][1].append(job)
        else:
            row = dict(job)
            groups[array_id] = (row, [job])
            rows.append(row)
    for array_id, (row, tasks) in groups.items():
        indices = sorted(int(t["array_task_id"]) for t in tasks)
        runs: list[list[int]] = []
        for index in indices:
            if runs and index == runs[-1][1] + 1:
                runs[-1][1] = index
            else:
                runs.append([index, index])
        text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
        states: dict[str, int] = {}
        reasons: dict[str, int] = {}
        for task in tasks:
            states[task["state"]] = states.get(task["state"], 0) + 1
            reasons[str(task.get("reason"))] = reasons.get(str(task.get("reason")), 0) + 1
        row.clear()
        row.update(min(tasks, key=lambda t: int(t["array_task_id"])))  # the lowest task's values
        row.update(id=f"{array_id}_[{text}]", array_task_id=None)
        row["state"] = max(states, key=lambda s: states[s])
        row["reason"] = max(reasons, key=lambda r: reasons[r])
        row["summary"] = {
            "indices": text,
            "tasks": len(tasks),
            "states": states,
            "reasons": reasons,
        }
    return rows


def slim_row(job: dict[str, Any]) -> list[Any]:
    """A job object as a row of GET /jobs?view=slim."""
    progress = job.get("progress") or {}
    error = job.get("error") or {}
    flat = {
        **job,
        "step": progress.get("step"),
        "total_steps": progress.get("total_steps"),
        "loss": progress.get("loss"),
        "error_kind": error.get("kind"),
    }
    return [flat.get(name) for name in SLIM_COLUMNS]
