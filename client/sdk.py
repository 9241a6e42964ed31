"""A small Python SDK over SAM's REST API (docs/contract.md section 2); the `sam` CLI is built on it.

    from client.sdk import SamClient
    with SamClient("http://127.0.0.1:8000", token) as sam:
        job = sam.submit_job(spec, {"model.py": source})
        final = sam.wait_for_job(job["id"])

Every failed call raises `client.errors.SamAPIError` (the server's problem+json) or
`client.errors.SamConnectionError` (the server could not be reached).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from client.errors import SamAPIError, SamConnectionError, SamTimeoutError
from client.sdk_transport import (
    API_PREFIX,
    DEFAULT_TIMEOUT_S,
    Transport,
    default_timeout_s,
    new_idempotency_key,
    problem_from_response,
    reason,
)

TYPE_CHECKING = False  # typing's import (and these) are spared on `sam submit`'s path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path
    from typing import Any

    from client.sse import ServerSentEvent

__all__ = [
    "ACTIVE_STATES",
    "API_PREFIX",
    "DEFAULT_TIMEOUT_S",
    "TERMINAL_STATES",
    "SamClient",
    "default_timeout_s",
    "new_idempotency_key",
    "problem_from_response",
]

TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})
ACTIVE_STATES = ("queued", "compiling", "pending", "running", "cancelling")
SLIM_PAGE_ROWS = 10_000  # rows per page of the slim listing (the server's SAM_LISTING_MAX_ROWS)


class SamClient(Transport):
    """A connection to one SAM server as one principal (its bearer token)."""

    # -- jobs ------------------------------------------------------------------------------

    def submit_job(
        self,
        spec: Mapping[str, object],
        files: dict[str, str] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Create a job; a retry with the same `idempotency_key` returns the same job."""
        key = idempotency_key or new_idempotency_key()
        body = {"spec": spec, "files": files or {}}
        return self._json_object("POST", "/jobs", json=body, headers={"Idempotency-Key": key})

    def validate_job(
        self, spec: Mapping[str, object], files: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Validate without creating: `{valid, spec (normalized), region: {rows, cols}}`."""
        body = {"spec": spec, "files": files or {}}
        return self._json_object("POST", "/jobs", params={"dry_run": "true"}, json=body)

    def list_jobs_page(
        self,
        *,
        states: Iterable[str] = (),
        user: str | None = None,
        tenant: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        jobs: Iterable[str] = (),
        expand_arrays: bool = False,
        slim: bool = False,
    ) -> dict[str, Any]:
        """One page of jobs, newest first: `{items, next_cursor}`, or with `slim` `{columns,
        rows, next_cursor}`. An array's waiting tasks are one row unless `expand_arrays`;
        `jobs`: only these jobs or these arrays' tasks."""
        params: list[tuple[str, str]] = [("state", s) for s in states]
        params += [("job", j) for j in jobs]
        for name, value in (
            ("user", user),
            ("tenant", tenant),
            ("limit", limit),
            ("cursor", cursor),
            ("arrays", "expand" if expand_arrays else None),
            ("view", "slim" if slim else None),
        ):
            if value is not None:
                params.append((name, str(value)))
        return self._json_object("GET", "/jobs", params=params)

    def list_jobs(
        self,
        *,
        states: Iterable[str] = (),
        user: str | None = None,
        tenant: str | None = None,
        page_size: int = 200,
        jobs: Iterable[str] = (),
        expand_arrays: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Every matching job (API objects), newest first, following `next_cursor` page by page;
        an array's waiting tasks are one row (its `summary`) unless `expand_arrays`."""
        states, jobs = list(states), list(jobs)
        cursor: str | None = None
        while True:
            page = self.list_jobs_page(
                states=states,
                user=user,
                tenant=tenant,
                limit=page_size,
                cursor=cursor,
                jobs=jobs,
                expand_arrays=expand_arrays,
            )
            yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def list_rows(
        self,
        *,
        states: Iterable[str] = (),
        user: str | None = None,
        tenant: str | None = None,
        jobs: Iterable[str] = (),
        expand_arrays: bool = False,
        page_size: int = SLIM_PAGE_ROWS,
    ) -> Iterator[dict[str, Any]]:
        """What `sam queue` shows: every matching job as the slim view's values (a job dict with
        `region`, `progress`, `error` kind; client.summaries), 10,000 a page; a server without
        the slim view answers job objects 200 a page instead."""
        from client.summaries import jobs_from_rows

        states, jobs = list(states), list(jobs)
        cursor: str | None = None
        while True:
            try:
                page = self.list_jobs_page(
                    states=states,
                    user=user,
                    tenant=tenant,
                    limit=page_size,
                    cursor=cursor,
                    jobs=jobs,
                    expand_arrays=expand_arrays,
                    slim=True,
                )
            except SamAPIError as exc:
                if exc.status != 422 or cursor is not None:
                    raise
                # an older server: no view=slim, and pages of at most 500 job objects
                yield from self.list_jobs(
                    states=states, user=user, tenant=tenant, jobs=jobs, expand_arrays=expand_arrays
                )
                return
            if "rows" in page:
                yield from jobs_from_rows(page.get("columns") or [], page["rows"])
            else:
                yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def get_job(self, job_id: str) -> dict[str, Any]:
        """The job object."""
        return self._json_object("GET", f"/jobs/{job_id}")

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """Ask for cancellation; the job comes back `cancelling` or `cancelled`."""
        # Not resent after a lost reply: a second cancel of a job that has just ended is a 409.
        return self._json_object("POST", f"/jobs/{job_id}/cancel", resend_after_reply=False)

    def hold_job(self, job_id: str) -> dict[str, Any]:
        """Hold a waiting job, or an array's waiting tasks: `{id, changed, unchanged}`."""
        return self._json_object("POST", f"/jobs/{job_id}/hold")

    def release_job(self, job_id: str) -> dict[str, Any]:
        """Lift a hold (a job's, or every task's of an array): `{id, changed, unchanged}`."""
        return self._json_object("POST", f"/jobs/{job_id}/release")

    def requeue_job(self, job_id: str, *, hold: bool = False) -> dict[str, Any]:
        """Send a running job back to the queue (from its checkpoint); `hold` also holds it."""
        params = {"hold": "true"} if hold else {}
        return self._json_object("POST", f"/jobs/{job_id}/requeue", params=params)

    def update_job(self, job_id: str, **changes: Any) -> dict[str, Any]:
        """Change `priority`, `time_limit` or `name` (None: unchanged): `{id, changed, unchanged}`."""
        body = {k: v for k, v in changes.items() if v is not None}
        return self._json_object("PATCH", f"/jobs/{job_id}", json=body)

    def logs(self, job_id: str, *, tail: int | None = None, since: str | None = None) -> str:
        """The job's log so far, as text: the last `tail` lines, lines at or after `since`."""
        return self.logs_window(job_id, tail=tail, since=since)[0]

    def logs_window(
        self, job_id: str, *, tail: int | None = None, since: str | None = None
    ) -> tuple[str, str | None]:
        """(the log text, the event id to follow on from: `follow_logs(after=...)`)."""
        params = {k: v for k, v in (("tail", tail), ("since", since)) if v is not None}
        headers = {"Accept": "text/plain"}
        response = self._send("GET", f"/jobs/{job_id}/logs", headers=headers, params=params)
        return response.text, response.headers.get("x-last-event-id")

    def follow_logs(
        self, job_id: str, *, after: str | None = None, reconnect_for_s: float = 120.0
    ) -> Iterator[ServerSentEvent]:
        """Stream the job's log live: `log` events (one line each), then one `end` event.

        A broken stream (a server restart, a network drop) is reopened with `Last-Event-ID`, so
        no line is lost or repeated; SamConnectionError only after `reconnect_for_s` seconds
        without reaching the server. A server that answers with plain text instead of a stream
        yields each line as a `log` event and no `end` event. `after`: start after that event id.
        """
        import httpx

        last_id: str | None = after
        down_since: float | None = None
        while True:
            try:
                for event in self._follow_once(job_id, last_id):
                    down_since = None  # the server answered: the outage, if any, is over
                    last_id = event.id or last_id
                    if event.event == "shutdown":
                        break  # the server is restarting: reconnect after it
                    if event.event == "plain-end":
                        return
                    yield event
                    if event.event == "end":
                        return
            except httpx.TransportError as exc:
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > reconnect_for_s:
                    raise SamConnectionError(self.url, reason(exc)) from exc
            time.sleep(self.retry_delay_s)

    def _follow_once(self, job_id: str, last_id: str | None) -> Iterator[ServerSentEvent]:
        import httpx

        from client.sse import ServerSentEvent, parse_sse

        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        timeout = httpx.Timeout(10.0, read=None)  # a quiet job must not time the stream out
        with self._http.stream(
            "GET", f"/jobs/{job_id}/logs", headers=headers, timeout=timeout
        ) as response:
            if response.status_code >= 500:  # e.g. a proxy's 502 while the server restarts
                raise httpx.RemoteProtocolError(f"HTTP {response.status_code}")
            if response.is_error:
                response.read()
                raise problem_from_response(response)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                yield from parse_sse(response.iter_lines())
                return
            for line in response.iter_lines():
                yield ServerSentEvent("log", line)
            yield ServerSentEvent("plain-end", "")

    def metrics(
        self, job_id: str, *, last: int | None = None, every: int | None = None
    ) -> dict[str, Any]:
        """Per-step training metrics: `{steps: [{step, loss, sim_cycles, samples_per_sec}], ...}`;
        `last` asks the server for only the newest N steps, `every` for every Nth step (and the
        newest) of those."""
        params = {k: v for k, v in (("last", last), ("every", every)) if v is not None}
        return self._json_object("GET", f"/jobs/{job_id}/metrics", params=params)

    def explain(self, job_id: str) -> dict[str, Any]:
        """Why the job is not running: `{state, reasons: [{code, message}], position, eta}`."""
        return self._json_object("GET", f"/jobs/{job_id}/explain")

    def report(self, job_id: str) -> dict[str, Any]:
        """The job's performance report."""
        return self._json_object("GET", f"/jobs/{job_id}/report")

    def artifacts(self, job_id: str) -> dict[str, Any]:
        """What the job has to download: `{weights, checkpoints: [{step, bytes, url}], report}`."""
        return self._json_object("GET", f"/jobs/{job_id}/artifacts")

    def download(self, url: str, dest: Path) -> int:
        """Stream the file at `url` (an API path such as `/api/v1/jobs/ID/weights`) into `dest`,
        written whole or not at all; returns its size in bytes."""
        import httpx

        path = url[len(API_PREFIX) :] if url.startswith(API_PREFIX) else url
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(f".{dest.name}.part")
        try:
            with self._http.stream("GET", path) as response:
                if response.is_error:
                    response.read()
                    raise problem_from_response(response)
                with open(partial, "wb") as handle:
                    for chunk in response.iter_bytes(1 << 20):
                        handle.write(chunk)
        except httpx.TransportError as exc:
            partial.unlink(missing_ok=True)
            raise SamConnectionError(self.url, reason(exc)) from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(dest)
        return dest.stat().st_size

    def wait_for_job(
        self,
        job_id: str,
        *,
        poll_interval_s: float = 1.0,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        reconnect_for_s: float = 120.0,
    ) -> dict[str, Any]:
        """Poll until the job ends; `on_update` sees every polled job. Returns the final job.

        The server unreachable for longer than `reconnect_for_s` raises SamConnectionError."""
        down_since: float | None = None
        while True:
            try:
                job = self.get_job(job_id)
            except (SamConnectionError, SamTimeoutError):
                # A restarting or busy server is not a failed job: keep asking for a while.
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > reconnect_for_s:
                    raise
                time.sleep(poll_interval_s)
                continue
            down_since = None
            if on_update is not None:
                on_update(job)
            if job.get("state") in TERMINAL_STATES:
                return job
            time.sleep(poll_interval_s)

    # -- cluster, queue, identity ----------------------------------------------------------

    # -- accounting ------------------------------------------------------------------------

    def acct(
        self,
        *,
        start: str | None = None,
        end: str | None = None,
        states: Iterable[str] = (),
        user: str | None = None,
        tenant: str | None = None,
        jobs: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Accounting records (`{start, end, items}`) of the jobs that existed during
        [start, end] (ISO 8601 times; the server's default: today so far)."""
        params: list[tuple[str, str]] = [("state", s) for s in states]
        params += [("job", j) for j in jobs]
        for key, value in (("start", start), ("end", end), ("user", user), ("tenant", tenant)):
            if value:
                params.append((key, value))
        result: dict[str, object] = self._json("GET", "/acct", params=params)
        return result

    def usage_report(
        self, *, start: str | None = None, end: str | None = None, tenant: str | None = None
    ) -> dict[str, Any]:
        """PE-hours per tenant and user inside [start, end] (`{start, end, pe_hours, tenants,
        users}`)."""
        params = {k: v for k, v in (("start", start), ("end", end), ("tenant", tenant)) if v}
        result: dict[str, object] = self._json("GET", "/reports/usage", params=params)
        return result

    def queue(self) -> list[dict[str, Any]]:
        """Jobs not yet running, in scheduling order, with position, priority, reasons and eta."""
        return list(self._json("GET", "/queue").get("items", []))

    def cluster(self) -> dict[str, Any]:
        """`{wafers: [...], compile_servers: [...]}`."""
        return self._json_object("GET", "/cluster")

    def whoami(self) -> dict[str, Any]:
        """The calling principal: `{name, tenant, role}`."""
        return self._json_object("GET", "/whoami")

    # -- tenants and users (admin) ---------------------------------------------------------

    def create_tenant(self, name: str, quota: Mapping[str, object] | None = None) -> dict[str, Any]:
        """Create a tenant with a quota (omitted fields: no limit)."""
        body = {"name": name, "quota": quota or {}}
        return self._json_object("POST", "/tenants", json=body, resend_after_reply=False)

    def list_tenants(self) -> list[dict[str, Any]]:
        """Every tenant the principal may see, each with `quota` and `usage`."""
        data = self._json("GET", "/tenants")
        return list(data.get("items", []) if isinstance(data, dict) else data)

    def get_tenant(self, name: str) -> dict[str, Any]:
        """One tenant with its `quota` and current `usage`."""
        return self._json_object("GET", f"/tenants/{name}")

    def set_quota(self, name: str, quota: Mapping[str, object]) -> dict[str, Any]:
        """Replace a tenant's quota; returns the tenant."""
        return self._json_object("PUT", f"/tenants/{name}/quota", json=quota)

    def create_user(self, tenant: str, name: str, role: str = "user") -> dict[str, Any]:
        """Create a user: `{name, tenant, role, token}`; the token is shown only this once."""
        body = {"name": name, "role": role}
        return self._json_object(
            "POST", f"/tenants/{tenant}/users", json=body, resend_after_reply=False
        )

    # -- tokens (own; a tenant admin: its tenant's; the cluster admin: all) ------------------

    def list_tokens(
        self, *, tenant: str | None = None, user: str | None = None, include_revoked: bool = False
    ) -> list[dict[str, Any]]:
        """Tokens the principal manages: `{id, prefix, user, tenant, created_at, last_used_at,
        revoked_at, bootstrap}` each, never a secret."""
        params: dict[str, object] = {"include_revoked": include_revoked}
        params.update({k: v for k, v in (("tenant", tenant), ("user", user)) if v})
        return list(self._json("GET", "/tokens", params=params))

    def revoke_token(self, token_id: int) -> dict[str, Any]:
        """Revoke a token; returns it (with `revoked_at`)."""
        return self._json_object("POST", f"/tokens/{token_id}/revoke")

    def rotate_token(self, token_id: int) -> dict[str, Any]:
        """Revoke a token and issue a new one: the new token's object with its `token`, shown
        only this once."""
        return self._json_object("POST", f"/tokens/{token_id}/rotate", resend_after_reply=False)
