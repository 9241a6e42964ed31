// SAM dashboard: a hash-routed page over the public API. Every call carries the SAM token of
// the browser session as `Authorization: Bearer`, live views read the API's SSE streams through
// fetch() (EventSource cannot send that header), and charts are drawn here on <canvas>.
"use strict";

const TOKEN_KEY = "sam-token";
const STATES = ["queued", "compiling", "pending", "running", "cancelling", "succeeded", "failed", "cancelled"];
const ACTIVE = ["queued", "compiling", "pending", "running", "cancelling"];
const WAITING = ["queued", "compiling", "pending"];
const ENDED = ["succeeded", "failed", "cancelled"];
const PRIORITIES = ["low", "normal", "high", "urgent"];
const PAGE_ROWS = 200; // rows per kind on the queue page (a screen shows ~30)

let me = null; // the principal (GET /whoami)
let pageAbort = null; // aborts the current page's requests and streams

// ---------------------------------------------------------------- small helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    // CSSOM, not the style attribute: the page's CSP allows no inline style attributes.
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").slice(0, 19);
}

function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  seconds = Math.max(0, Math.round(seconds));
  const d = Math.floor(seconds / 86400), hh = Math.floor((seconds % 86400) / 3600);
  const mm = Math.floor((seconds % 3600) / 60), ss = seconds % 60;
  const two = (n) => String(n).padStart(2, "0");
  return (d ? d + "-" : "") + (d || hh ? two(hh) + ":" : "") + two(mm) + ":" + two(ss);
}

function fmtNum(x, digits = 4) {
  if (x === null || x === undefined) return "";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  return Math.abs(x) >= 1000 ? x.toLocaleString("en-US", { maximumFractionDigits: 1 }) : x.toPrecision(digits);
}

function tenantColour(name) {
  if (!name) return "#9aa3ad";
  // FNV-1a, then golden-angle steps: names that differ in one letter get far-apart hues.
  let hash = 2166136261;
  for (const ch of name) { hash ^= ch.charCodeAt(0); hash = Math.imul(hash, 16777619) >>> 0; }
  return `hsl(${Math.round((hash % 1000) * 137.508) % 360}, 62%, 52%)`;
}

function regionText(r) {
  return r ? `${r.wafer}[${r.row}:${r.row + r.rows},${r.col}:${r.col + r.cols}]` : "";
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
  }
}

function authHeaders(extra) {
  return Object.assign({ Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) }, extra || {});
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    method: options.method || "GET",
    headers: authHeaders(options.headers),
    body: options.body,
    signal: options.signal || (pageAbort && pageAbort.signal),
  });
  if (response.status === 401 && !options.noSignOut) {
    signOut("Your token was refused (HTTP 401); sign in again.");
    throw new ApiError(401, null);
  }
  if (!response.ok) {
    let problem = null;
    try { problem = await response.json(); } catch (e) { /* not problem+json */ }
    throw new ApiError(response.status, problem);
  }
  if (options.raw) return response;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

// One SSE stream read with fetch (so the bearer header goes along), reconnecting with
// Last-Event-ID until an `end` event, the page changing, or a 4xx answer.
function stream(path, onEvent, { lastEventId = null, signal } = {}) {
  let last = lastEventId;
  let ended = false;
  const run = async () => {
    while (!ended && !signal.aborted) {
      try {
        const headers = authHeaders({ Accept: "text/event-stream" });
        if (last !== null && last !== undefined) headers["Last-Event-ID"] = String(last);
        const response = await fetch(path, { headers, signal });
        if (response.status >= 400 && response.status < 500) {
          if (response.status === 401) signOut("Your token was refused (HTTP 401); sign in again.");
          return;
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let event = "message", id = null;
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "event") event = text;
              else if (field === "data") data.push(text);
              else if (field === "id") id = text;
            }
            if (id !== null) last = id;
            if (!data.length) continue;
            if (event === "end") { ended = true; onEvent("end", data.join("\n")); return; }
            if (event === "shutdown") break;
            onEvent(event, data.join("\n"));
          }
        }
      } catch (e) {
        if (signal.aborted) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  run();
}

// ---------------------------------------------------------------- sign-in and routing

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  renderSignIn(message);
}

function renderSignIn(message) {
  if (pageAbort) pageAbort.abort();
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", placeholder: "SAM token", required: true });
  const error = h("p", { class: "error", id: "signin-error" }, message || "");
  const form = h("form", { id: "signin", onsubmit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      me = await api("/api/v1/whoami", { noSignOut: true, signal: new AbortController().signal });
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      error.textContent = e.status === 401 ? "That token is not valid (HTTP 401)." : "Sign-in failed: " + e.message;
      return;
    }
    route();
  } },
  h("h1", {}, "Sign in to SAM"),
  h("p", {}, "Paste a SAM token (", h("code", {}, "sam admin user create"), " prints one). It is kept only in this browser tab's session."),
  input, h("button", { type: "submit" }, "Sign in"), error);
  document.getElementById("main").replaceChildren(form);
  input.focus();
}

async function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) return renderSignIn();
  if (pageAbort) pageAbort.abort();
  pageAbort = new AbortController();
  if (!me) {
    try { me = await api("/api/v1/whoami"); } catch (e) { return; }
  }
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  document.getElementById("who").textContent = `${me.name}` + (me.tenant ? ` @ ${me.tenant}` : "") + (me.role === "admin" ? ` (${me.admin_of || "admin"} admin)` : "");
  const hash = location.hash.replace(/^#\/?/, "") || "queue";
  const [page, arg] = hash.split("/");
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.page === page);
  const main = document.getElementById("main");
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  const signal = pageAbort.signal;
  try {
    if (page === "jobs" && arg) await jobPage(main, decodeURIComponent(arg), signal);
    else if (page === "cluster") await clusterPage(main, signal);
    else if (page === "tenants") await tenantsPage(main, signal);
    else await queuePage(main, signal);
  } catch (e) {
    if (!signal.aborted && e.status !== 401) main.replaceChildren(h("p", { class: "error" }, e.message));
  }
}

// ---------------------------------------------------------------- Queue

function queueFilters() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  return {
    tenant: params.get("tenant") || "",
    user: params.get("user") || "",
    state: params.get("state") || "active",
    priority: params.get("priority") || "",
  };
}

async function queuePage(main, signal) {
  const filters = queueFilters();
  const tenants = me.admin_of === "cluster" ? await api("/api/v1/tenants") : [];
  const select = (name, options, value) => h("select", { name, id: "filter-" + name },
    options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
  const form = h("form", { class: "filters", id: "queue-filters", onchange: () => {
    const data = new FormData(form);
    const params = new URLSearchParams();
    for (const [k, v] of data.entries()) if (v) params.set(k, v);
    location.hash = "#/queue?" + params.toString();
  }, onsubmit: (ev) => ev.preventDefault() },
  tenants.length ? h("label", {}, "Tenant ", select("tenant", [["", "all"], ...tenants.map((t) => [t.name, t.name])], filters.tenant)) : null,
  h("label", {}, "User ", h("input", { name: "user", id: "filter-user", value: filters.user, size: 10 })),
  h("label", {}, "State ", select("state", [["active", "active"], ["all", "all"], ...STATES.map((s) => [s, s])], filters.state)),
  h("label", {}, "Priority ", select("priority", [["", "any"], ...PRIORITIES.map((p) => [p, p])], filters.priority)));
  const summary = h("p", { class: "muted", id: "queue-summary" });
  const body = h("tbody", { id: "queue-rows" });
  const table = h("table", { class: "grid", id: "queue-table" },
    h("thead", {}, h("tr", {}, ["JOBID", "TENANT", "NAME", "USER", "STATE", "PRIORITY", "POS", "TIME", "REGION / PROGRESS", "REASON", "ETA"].map((c) => h("th", {}, c)))),
    body);
  main.replaceChildren(h("h1", {}, "Queue"), form, summary, table);

  // Waiting jobs come from /queue (the scheduler's order, with reasons, position and ETA);
  // running and ended ones from /jobs. Each call returns at most PAGE_ROWS: a page stays fast with
  // any number of jobs in the database.
  const load = async () => {
    const states = filters.state === "active" ? ACTIVE : filters.state === "all" ? STATES : [filters.state];
    const waitingStates = states.filter((s) => WAITING.includes(s));
    const otherStates = states.filter((s) => !WAITING.includes(s));
    const narrow = new URLSearchParams({ limit: String(PAGE_ROWS) });
    if (filters.user) narrow.set("user", filters.user);
    if (filters.tenant) narrow.set("tenant", filters.tenant);
    const listed = new URLSearchParams(narrow);
    for (const s of otherStates) listed.append("state", s);
    const [queue, page] = await Promise.all([
      waitingStates.length ? api("/api/v1/queue?" + narrow.toString(), { signal }) : Promise.resolve({ items: [] }),
      otherStates.length ? api("/api/v1/jobs?" + listed.toString(), { signal }) : Promise.resolve({ items: [], next_cursor: null }),
    ]);
    const waiting = queue.items.filter((j) => waitingStates.includes(j.state));
    const rank = (j) => (["running", "cancelling"].includes(j.state) ? 0 : 2);
    const others = page.items.slice().sort((a, b) => rank(a) - rank(b));
    let jobs = [...others.filter((j) => rank(j) === 0), ...waiting, ...others.filter((j) => rank(j) === 2)];
    if (filters.priority) jobs = jobs.filter((j) => j.priority === filters.priority);
    body.replaceChildren(...jobs.map(queueRow));
    const cut = page.next_cursor || queue.items.length >= PAGE_ROWS;
    const more = cut ? ` (the first ${PAGE_ROWS} waiting and newest ${PAGE_ROWS} others; narrow the filters to see more)` : "";
    summary.textContent = `${jobs.length} job${jobs.length === 1 ? "" : "s"}` + more + `, updated ${new Date().toLocaleTimeString()}`;
    summary.dataset.renderedMs = performance.now().toFixed(1); // ms since navigation (benchmark)
  };
  await load();
  let pending = null;
  const reload = () => {
    if (pending) return;
    pending = setTimeout(async () => { pending = null; try { await load(); } catch (e) { /* next event retries */ } }, 300);
  };
  stream("/api/v1/events", (event, data) => {
    if (event === "job") reload();
    else if (event === "progress") {
      for (const p of JSON.parse(data).items) {
        const cell = body.querySelector(`tr[data-job="${CSS.escape(p.id)}"] .progress`);
        if (cell) cell.textContent = progressText(p);
      }
    }
  }, { signal });
  // Positions and ETAs move with every scheduling cycle, not only with state changes.
  const timer = setInterval(reload, 15000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

function progressText(p) {
  const loss = p.loss === null || p.loss === undefined ? "" : ` loss ${fmtNum(p.loss)}`;
  return `step ${p.step}/${p.total_steps}${loss}`;
}

function queueRow(j) {
  const since = j.started_at || j.created_at;
  const end = j.finished_at ? new Date(j.finished_at) : new Date();
  const reasons = (j.reasons || []).map((r) => r.code).join(", ") || (ENDED.includes(j.state) ? (j.error ? j.error.kind : "") : (j.reason || ""));
  const title = (j.reasons || []).map((r) => `${r.code}: ${r.message}`).join("\n");
  const running = ["running", "cancelling"].includes(j.state);
  const where = running ? `${regionText(j.region)} ${j.progress ? progressText(j.progress) : ""}` : regionText(j.region);
  return h("tr", { dataset: { job: j.id, state: j.state, tenant: j.tenant } },
    h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.id)),
    h("td", {}, h("span", { class: "swatch", style: `background:${tenantColour(j.tenant)}` }), j.tenant),
    h("td", {}, j.name), h("td", {}, j.user),
    h("td", {}, h("span", { class: "state " + j.state }, j.state)),
    h("td", {}, j.priority),
    h("td", { class: "num" }, j.position ?? ""),
    h("td", { class: "num" }, fmtDuration((end - new Date(since)) / 1000)),
    h("td", { class: "progress" }, where),
    h("td", { title }, reasons),
    h("td", {}, j.eta ? fmtTime(j.eta) : ""));
}

// ---------------------------------------------------------------- a Job

async function jobPage(main, id, signal) {
  const [job, spec] = await Promise.all([api(`/api/v1/jobs/${encodeURIComponent(id)}`, { signal }), openapi()]);
  const paths = spec.paths || {};
  const head = h("div", { class: "jobhead" });
  const actions = h("div", { class: "actions" });
  const timeline = h("div", { id: "timeline" });
  const explainBox = h("div", { id: "explain" });
  const lossCanvas = h("canvas", { id: "loss-chart", width: 640, height: 240 });
  const rateCanvas = h("canvas", { id: "rate-chart", width: 640, height: 140 });
  const stepInfo = h("p", { id: "step-info", class: "muted" });
  const logBox = h("pre", { id: "log", class: "log" });
  const reportBox = h("div", { id: "report" });
  main.replaceChildren(head, actions,
    h("section", {}, h("h2", {}, "State timeline"), timeline),
    h("section", {}, h("h2", {}, "Why it is (not) running"), explainBox),
    h("section", {}, h("h2", {}, "Training"), stepInfo, lossCanvas, rateCanvas),
    h("section", {}, h("h2", {}, "Log (tail, live)"), logBox),
    h("section", {}, h("h2", {}, "Performance report"), reportBox));

  let current = job;
  const base = `/api/v1/jobs/${encodeURIComponent(id)}`;
  const refresh = async () => {
    current = await api(base, { signal });
    renderHead(head, current);
    renderActions(actions, current, paths, base, refresh);
    const [events, explain] = await Promise.all([api(base + "/events", { signal }), api(base + "/explain", { signal })]);
    renderTimeline(timeline, events.items, current);
    renderExplain(explainBox, explain);
    if (ENDED.includes(current.state)) await renderReport(reportBox, base, signal);
    else reportBox.replaceChildren(h("p", { class: "muted" }, "The report is written when the run ends."));
  };
  await refresh();

  // Loss curve and samples/s: the newest steps, then every new step from the metrics stream.
  const metrics = await api(base + "/metrics?last=5000", { signal });
  const steps = metrics.steps;
  const draw = () => {
    drawLine(lossCanvas, steps.map((s) => [s.step, s.loss]), { title: "loss", colour: "#d9480f" });
    drawLine(rateCanvas, steps.map((s) => [s.step, s.samples_per_sec]), { title: "samples/s (simulated)", colour: "#1971c2" });
    const last = steps[steps.length - 1];
    stepInfo.dataset.steps = String(steps.length);
    stepInfo.dataset.lastStep = last ? String(last.step) : "";
    stepInfo.textContent = last
      ? `step ${last.step + 1} of ${current.progress ? current.progress.total_steps : "?"}: loss ${fmtNum(last.loss)}, ${fmtNum(last.samples_per_sec)} samples/s, ${fmtNum(last.sim_cycles)} cycles`
      : "No steps recorded yet.";
  };
  draw();
  let frame = null;
  const lastStep = steps.length ? steps[steps.length - 1].step : null;
  if (!ENDED.includes(current.state)) {
    stream(base + "/metrics", (event, data) => {
      if (event === "step") {
        const s = JSON.parse(data);
        if (!steps.length || s.step > steps[steps.length - 1].step) steps.push(s);
      } else if (event === "reset") {
        const at = JSON.parse(data).step;
        while (steps.length && steps[steps.length - 1].step > at) steps.pop();
      } else if (event === "end") refresh().catch(() => {});
      if (!frame) frame = requestAnimationFrame(() => { frame = null; draw(); });
    }, { lastEventId: lastStep, signal });
  }

  // Log: the tail, then the live stream from the id the tail ended at.
  const logs = await api(base + "/logs?tail=200", { signal, raw: true });
  const lines = (await logs.text()).split("\n").filter(Boolean);
  const showLog = () => { logBox.textContent = lines.slice(-200).join("\n"); logBox.scrollTop = logBox.scrollHeight; };
  showLog();
  if (!ENDED.includes(current.state)) {
    stream(base + "/logs", (event, data) => {
      if (event === "log") { lines.push(data); if (lines.length > 400) lines.splice(0, lines.length - 200); showLog(); }
    }, { lastEventId: logs.headers.get("X-Last-Event-ID"), signal });
  }

  // State changes of this job come through the tenant's event stream.
  stream("/api/v1/events", (event, data) => {
    if (event === "job" && JSON.parse(data).id === id) refresh().catch(() => {});
  }, { signal });
}

let openapiCache = null;
async function openapi() {
  if (!openapiCache) openapiCache = await (await fetch("/openapi.json")).json();
  return openapiCache;
}

function renderHead(head, j) {
  head.replaceChildren(
    h("h1", {}, j.name, " ", h("span", { class: "state " + j.state, id: "job-state" }, j.state)),
    h("dl", { class: "facts" },
      ...[["Job", j.id], ["Tenant", j.tenant], ["User", j.user], ["Priority", j.priority], ["Mode", j.mode],
        ["Script", j.entry ? [j.entry.script, ...j.entry.args].join(" ") : ""],
        ["Region", regionText(j.region)], ["Attempts", j.attempts], ["Submitted", fmtTime(j.created_at)],
        ["Started", fmtTime(j.started_at)], ["Finished", fmtTime(j.finished_at)],
        ["Compile", j.compile ? `${j.compile.cache_hit ? "cache hit" : "compiled"} in ${fmtNum(j.compile.seconds, 3)} s` : ""],
        ["Error", j.error ? `${j.error.kind}: ${j.error.message}` : ""]]
        .filter(([, v]) => v !== "" && v !== null && v !== undefined)
        .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])));
}

function renderActions(box, j, paths, base, refresh) {
  const button = (label, verb, id) => h("button", { id, onclick: async () => {
    try { await api(`${base}/${verb}`, { method: "POST" }); await refresh(); } catch (e) { alert(`${label} failed: ${e.message}`); }
  } }, label);
  const offered = (verb) => Boolean(paths[`/api/v1/jobs/{job_id}/${verb}`]);
  box.replaceChildren(...[
    !ENDED.includes(j.state) && j.state !== "cancelling" ? button("Cancel", "cancel", "cancel") : null,
    offered("hold") && WAITING.includes(j.state) ? button("Hold", "hold", "hold") : null,
    offered("release") && WAITING.includes(j.state) ? button("Release", "release", "release") : null,
  ].filter(Boolean));
}

function renderTimeline(box, events, job) {
  if (!events.length) return box.replaceChildren(h("p", { class: "muted" }, "No transitions yet."));
  const t0 = new Date(events[0].at).getTime();
  const tEnd = job.finished_at ? new Date(job.finished_at).getTime() : Date.now();
  const span = Math.max(tEnd - t0, 1);
  const bar = h("div", { class: "timeline-bar" });
  events.forEach((e, i) => {
    const start = new Date(e.at).getTime();
    const stop = i + 1 < events.length ? new Date(events[i + 1].at).getTime() : tEnd;
    bar.append(h("span", { class: "seg state-bg " + e.to_state, style: `width:${Math.max(((stop - start) / span) * 100, 0.8)}%`, title: `${e.to_state} ${fmtDuration((stop - start) / 1000)}` }));
  });
  const rows = events.map((e) => h("tr", {}, h("td", {}, fmtTime(e.at)), h("td", {}, e.from_state || "(submitted)"), h("td", {}, "→ ", h("span", { class: "state " + e.to_state }, e.to_state)), h("td", {}, e.reason || "")));
  box.replaceChildren(bar, h("table", { class: "grid" }, h("tbody", {}, rows)));
}

function renderExplain(box, x) {
  box.replaceChildren(...[
    h("p", {}, `state ${x.state}`, x.position !== null && x.position !== undefined ? `, position ${x.position}` : "", x.eta ? `, ETA ${fmtTime(x.eta)}` : ""),
    x.reasons.length ? h("ul", {}, x.reasons.map((r) => h("li", {}, h("b", {}, r.code), ": ", r.message))) : h("p", { class: "muted" }, "Nothing holds it back."),
    x.priority ? h("p", { class: "muted" }, `priority ${x.priority.total}: ` + Object.entries(x.priority.factors || {}).map(([k, v]) => `${k} ${v}`).join(", ")) : null,
  ].filter(Boolean));
}

async function renderReport(box, base, signal) {
  const report = await api(base + "/report", { signal });
  const run = report.run;
  if (!run) return box.replaceChildren(h("p", { class: "muted" }, "No report: the job never ran on a wafer."));
  const t = run.throughput || {};
  const images = h("div", { class: "heatmaps" });
  for (const [name, url] of Object.entries(report.images || {})) {
    try {
      const blob = await (await api(url, { signal, raw: true })).blob();
      images.append(h("figure", {}, h("img", { src: URL.createObjectURL(blob), alt: `${name} heatmap`, id: `heatmap-${name}` }), h("figcaption", {}, name)));
    } catch (e) { images.append(h("p", { class: "muted" }, `${name}: ${e.message}`)); }
  }
  const kernels = (run.kernels || []).slice().sort((a, b) => b.total_cycles_per_step - a.total_cycles_per_step);
  box.replaceChildren(
    h("dl", { class: "facts" }, ...[["Steps", t.steps], ["Simulated cycles", t.sim_cycles], ["Simulated seconds", t.sim_seconds],
      ["Cycles / step", t.cycles_per_step], ["Samples / s", t.samples_per_sec], ["Mean PE utilization", run.utilization_mean],
      ["SRAM high water (bytes/PE)", run.sram_high_water_bytes]].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, fmtNum(v))])),
    images,
    h("h3", {}, "Cycles per step by kernel"),
    h("table", { class: "grid", id: "kernel-table" },
      h("thead", {}, h("tr", {}, ["kernel", "op", "PEs", "FLOPs", "cycles/step", "by kind"].map((c) => h("th", {}, c)))),
      h("tbody", {}, kernels.map((k) => h("tr", {}, h("td", {}, k.id), h("td", {}, k.op || ""),
        h("td", { class: "num" }, k.rect ? fmtNum(k.rect[2] * k.rect[3]) : ""), h("td", { class: "num" }, fmtNum(k.flops)),
        h("td", { class: "num" }, fmtNum(k.total_cycles_per_step)),
        h("td", {}, Object.entries(k.cycles_per_step || {}).map(([kind, c]) => `${kind} ${fmtNum(c)}`).join(", ")))))));
}

const TICK = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });

// A line chart with axes and tick labels: points [[x, y]], nulls (non-finite losses) skipped.
function drawLine(canvas, points, { title, colour }) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 64, R = 12, T = 20, B = 28;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "12px system-ui, sans-serif";
  ctx.fillStyle = "#333";
  ctx.fillText(`${title} by step`, L, 13);
  const pts = points.filter(([, y]) => y !== null && y !== undefined && isFinite(y));
  canvas.dataset.points = String(pts.length);
  if (!pts.length) { ctx.fillStyle = "#888"; ctx.fillText("no data yet", L + 10, H / 2); return; }
  let x0 = pts[0][0], x1 = pts[pts.length - 1][0];
  if (x1 === x0) x1 = x0 + 1;
  let y0 = Math.min(...pts.map((p) => p[1])), y1 = Math.max(...pts.map((p) => p[1]));
  if (y1 === y0) { y0 -= Math.abs(y0) * 0.05 || 1; y1 += Math.abs(y1) * 0.05 || 1; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1; ctx.fillStyle = "#555";
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4, py = sy(y);
    ctx.beginPath(); ctx.moveTo(L, py); ctx.lineTo(W - R, py); ctx.stroke();
    ctx.fillText(TICK.format(y), 4, py + 4);
  }
  for (let i = 0; i <= 4; i++) {
    const x = x0 + ((x1 - x0) * i) / 4;
    const label = String(Math.round(x));
    ctx.fillText(label, Math.min(sx(x) - 8, W - R - ctx.measureText(label).width), H - 10);
  }
  ctx.strokeStyle = colour; ctx.lineWidth = 1.6;
  ctx.beginPath();
  pts.forEach(([x, y], i) => (i ? ctx.lineTo(sx(x), sy(y)) : ctx.moveTo(sx(x), sy(y))));
  ctx.stroke();
}

// ---------------------------------------------------------------- Cluster

async function clusterPage(main, signal) {
  const wafersBox = h("div", { id: "wafers", class: "wafers" });
  const servers = h("div", { id: "compile-servers" });
  main.replaceChildren(h("h1", {}, "Cluster"), wafersBox, h("h2", {}, "Compile servers"), servers);
  const render = (view) => {
    wafersBox.replaceChildren(...view.wafers.map(waferCard));
    const rows = (view.compile_servers || []).map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, h("span", { class: "state " + (s.state === "online" ? "running" : "failed") }, s.state)),
      h("td", { class: "num" }, s.slots ? `${s.busy}/${s.slots}` : s.busy), h("td", { class: "num" }, s.compiles), h("td", { class: "num" }, s.cache_hits), h("td", {}, fmtTime(s.heartbeat_at))));
    const q = view.compile_queue || {};
    const queueLine = h("p", { id: "compile-queue" },
      `Compile queue: ${q.queued ?? 0} waiting for a slot, ${q.compiling ?? 0} compiling` +
      ` (yours: ${q.queued_mine ?? 0} waiting, ${q.compiling_mine ?? 0} compiling). Slots go to the tenant with the fewest compiles in flight.`);
    servers.replaceChildren(queueLine, rows.length
      ? h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["server", "state", "busy/slots", "compiles", "cache hits", "heartbeat"].map((c) => h("th", {}, c)))), h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No compile server has reported yet."));
  };
  render(await api("/api/v1/cluster", { signal }));
  stream("/api/v1/events", (event, data) => { if (event === "cluster") render(JSON.parse(data)); }, { signal });
}

function waferCard(w) {
  const total = w.rows * w.cols;
  const used = total - w.free_pes;
  const scale = Math.min(420 / w.cols, 320 / w.rows);
  const canvas = h("canvas", { class: "wafer", width: Math.max(Math.round(w.cols * scale), 40), height: Math.max(Math.round(w.rows * scale), 40), dataset: { wafer: w.id, regions: String(w.allocations.length) } });
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = w.state === "online" ? "#eef1f4" : "#f6e3e3";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  // the PE grid itself where a cell is big enough to see
  if (scale >= 4) {
    ctx.strokeStyle = "#dde2e7"; ctx.lineWidth = 0.5;
    for (let r = 0; r <= w.rows; r++) { ctx.beginPath(); ctx.moveTo(0, r * scale); ctx.lineTo(w.cols * scale, r * scale); ctx.stroke(); }
    for (let c = 0; c <= w.cols; c++) { ctx.beginPath(); ctx.moveTo(c * scale, 0); ctx.lineTo(c * scale, w.rows * scale); ctx.stroke(); }
  }
  const legend = h("ul", { class: "legend" });
  for (const a of w.allocations) {
    const colour = tenantColour(a.tenant);
    ctx.fillStyle = colour;
    const x = a.col * scale, y = a.row * scale, cw = Math.max(a.cols * scale, 1), ch = Math.max(a.rows * scale, 1);
    ctx.fillRect(x, y, cw, ch);
    ctx.strokeStyle = "#222"; ctx.lineWidth = 1; ctx.strokeRect(x + 0.5, y + 0.5, cw - 1, ch - 1);
    const label = `${a.tenant || "another tenant"}: ${a.job_id || "(hidden)"} ${a.rows}×${a.cols} at (${a.row}, ${a.col})`;
    legend.append(h("li", { dataset: { job: a.job_id || "" } }, h("span", { class: "swatch", style: `background:${colour}` }),
      a.job_id ? h("a", { href: `#/jobs/${encodeURIComponent(a.job_id)}` }, label) : label));
  }
  ctx.strokeStyle = "#555"; ctx.strokeRect(0.5, 0.5, canvas.width - 1, canvas.height - 1);
  const frag = w.fragmentation !== undefined && w.fragmentation !== null
    ? `, fragmentation ${typeof w.fragmentation === "number" ? fmtNum(w.fragmentation, 3) : JSON.stringify(w.fragmentation)}` : "";
  return h("div", { class: "wafer-card", dataset: { wafer: w.id } },
    h("h3", {}, `${w.id} `, h("span", { class: "state " + (w.state === "online" ? "running" : "failed") }, w.state)),
    h("p", { class: "muted" }, `${w.arch}, ${w.rows}×${w.cols} PEs, ${fmtNum(used)} in use (${((used / total) * 100).toFixed(1)}%), ${fmtNum(w.free_pes)} free${frag}`),
    canvas, legend);
}

// ---------------------------------------------------------------- Tenants

async function tenantsPage(main, signal) {
  const [tenants, queue, tokens] = await Promise.all([
    api("/api/v1/tenants", { signal }),
    api("/api/v1/queue?limit=500", { signal }),
    me.role === "admin" ? api("/api/v1/tokens", { signal }) : Promise.resolve([]),
  ]);
  // The fair-share factor each tenant's waiting jobs got in the last scheduling cycle.
  const fair = new Map();
  for (const q of queue.items) {
    const f = q.priority_detail && q.priority_detail.factors ? q.priority_detail.factors.fairshare ?? q.priority_detail.factors.fair_share : undefined;
    if (f !== undefined && !fair.has(q.tenant)) fair.set(q.tenant, f);
  }
  const limit = (v) => (v === null || v === undefined ? "∞" : fmtNum(v));
  const rows = tenants.map((t) => h("tr", { dataset: { tenant: t.name } },
    h("td", {}, h("span", { class: "swatch", style: `background:${tenantColour(t.name)}` }), t.name),
    h("td", { class: "num" }, `${t.usage.running_jobs} / ${limit(t.quota.max_running_jobs)}`),
    h("td", { class: "num" }, `${t.usage.queued_jobs} / ${limit(t.quota.max_queued_jobs)}`),
    h("td", { class: "num" }, `${fmtNum(t.usage.pes)} / ${limit(t.quota.max_pes)}`),
    h("td", { class: "num" }, fmtNum(t.usage.pe_seconds, 4)),
    h("td", { class: "num" }, fmtNum(t.quota.share)),
    h("td", { class: "num" }, fair.has(t.name) ? fmtNum(fair.get(t.name), 3) : "")));
  const parts = [h("h1", {}, "Tenants"),
    h("table", { class: "grid", id: "tenant-table" },
      h("thead", {}, h("tr", {}, ["tenant", "running / max", "queued / max", "PEs held / max", "PE-seconds (decayed)", "share", "fair-share factor"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows))];
  if (me.role === "admin") {
    const users = new Map();
    for (const t of tokens) users.set(`${t.tenant || "(cluster)"}/${t.user}`, t);
    parts.push(h("h2", {}, "Users"),
      h("table", { class: "grid", id: "user-table" }, h("thead", {}, h("tr", {}, ["tenant", "user", "tokens"].map((c) => h("th", {}, c)))),
        h("tbody", {}, [...users.keys()].sort().map((key) => {
          const [tenant, user] = key.split("/");
          return h("tr", {}, h("td", {}, tenant), h("td", {}, user), h("td", { class: "num" }, tokens.filter((t) => (t.tenant || "(cluster)") === tenant && t.user === user).length));
        }))),
      h("h2", {}, "Tokens"),
      h("table", { class: "grid", id: "token-table" }, h("thead", {}, h("tr", {}, ["id", "prefix", "tenant", "user", "created", "last used", ""].map((c) => h("th", {}, c)))),
        h("tbody", {}, tokens.map((t) => h("tr", {}, h("td", {}, t.id), h("td", {}, h("code", {}, t.prefix + "…")), h("td", {}, t.tenant || "(cluster)"), h("td", {}, t.user),
          h("td", {}, fmtTime(t.created_at)), h("td", {}, fmtTime(t.last_used_at)),
          h("td", {}, t.bootstrap ? "bootstrap" : h("button", { onclick: async () => {
            if (!confirm(`Revoke token ${t.prefix}… of ${t.user}?`)) return;
            await api(`/api/v1/tokens/${t.id}/revoke`, { method: "POST" });
            route();
          } }, "Revoke")))))));
  }
  main.replaceChildren(...parts);
}

// ---------------------------------------------------------------- start

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("signout").addEventListener("click", () => signOut("Signed out."));
  route();
});
