"""Rendering API objects for people (tables, key/value views) and machines (JSON, YAML)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

TYPE_CHECKING = False  # typing's import is spared on a short command's path (client.fastqueue)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

OUTPUT_FORMATS = ("table", "wide", "json", "yaml")

# Slurm-style short state codes (squeue's ST column).
STATE_CODES = {
    "queued": "Q",
    "compiling": "CG",
    "pending": "PD",
    "running": "R",
    "cancelling": "CL",
    "succeeded": "CD",
    "failed": "F",
    "cancelled": "CA",
}
REASON_WIDTH = 32
STATE_LEGEND = ", ".join(f"{code}={state}" for state, code in STATE_CODES.items())

# Characters a tenant may put in a job name that would lie on a terminal: C0/C1 controls (NUL,
# escape sequences, line breaks that forge rows) and the bidirectional overrides and isolates
# (U+202E turns `exe.txt` into `txt.exe`). Tables and key/value views show them escaped.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_char(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """`text` with every unsafe character shown as its escape (`\\u202e`, `\\x00`, `\\n`)."""
    return _UNSAFE.sub(_escape_char, text)


# What YAML's emitter writes as it is under allow_unicode (it escapes the C0 controls itself).
_UNSAFE_IN_YAML = re.compile(r"[\x80-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def dump_data(data: object, fmt: str) -> str:
    """Raw API objects as pretty JSON or block YAML (`fmt` is `json` or `yaml`); either escapes
    the characters that would lie on a terminal, so the text still parses to the same data."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False, default=str)
    import yaml  # only for YAML output (its import is a large part of a short command's start)

    def dump(allow_unicode: bool) -> str:
        text: str = yaml.safe_dump(
            data, sort_keys=False, default_flow_style=False, allow_unicode=allow_unicode
        )
        return text.rstrip("\n")

    text = dump(allow_unicode=True)
    # A bidi override (a tenant's job name): every non-ASCII character escaped instead.
    return dump(allow_unicode=False) if _UNSAFE_IN_YAML.search(text) else text


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, no_headers: bool = False
) -> str:
    """Left-aligned columns separated by two spaces (kubectl style); None renders as `-`."""
    # a non-empty str is its own cell: the common case of 10,000-row listings, kept cheap
    cells = [[v if type(v) is str and v else _cell(v) for v in row] for row in rows]
    # one scan of all cells at once; only a listing that holds an unsafe character pays more
    if _UNSAFE.search("".join(map("".join, cells))):
        cells = [[printable(v) for v in row] for row in cells]
    lines = cells if no_headers else [list(headers), *cells]
    if not lines:
        return ""
    widths = [max(map(len, column)) for column in zip(*lines, strict=True)]
    # each line as one %-format of left-justified fields (the last one unpadded)
    pattern = "  ".join(f"%-{w}s" for w in widths[:-1]) + ("  %s" if len(widths) > 1 else "%s")
    return "\n".join((pattern % tuple(line)).rstrip() for line in lines)


def render_key_values(pairs: Sequence[tuple[str, object]]) -> str:
    """A `Key: value` view with aligned values (like `scontrol show job`)."""
    width = max((len(key) for key, _ in pairs), default=0)
    return "\n".join(f"{key + ':':<{width + 1}} {printable(_cell(value))}" for key, value in pairs)


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def state_code(state: str | None) -> str:
    """The short code for a job state (`pending` -> `PD`), or the word for an unknown state."""
    if not state:
        return "-"
    return STATE_CODES.get(state, state)


def parse_time(value: object) -> datetime | None:
    """An ISO-8601 time from the API as an aware datetime (naive times are taken as UTC)."""
    if not value or not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def format_duration(seconds: float) -> str:
    """squeue's TIME format: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def job_elapsed(job: Mapping[str, object], now: datetime) -> str:
    """Run time of a started job (to its end or now), else time waited since submission."""
    # Each time parsed only when it is needed: a listing of 10,000 waiting jobs calls this
    # 10,000 times.
    begin = parse_time(job.get("started_at")) or parse_time(job.get("created_at"))
    if begin is None:
        return "-"
    finished = job.get("finished_at")
    end = (parse_time(finished) if finished else None) or now
    return format_duration((end - begin).total_seconds())


def format_region(region: Mapping[str, object] | None) -> str:
    """`wafer:row,col+ROWSxCOLS`, or `-` for no region."""
    if not region:
        return "-"
    where = f"{region.get('row')},{region.get('col')}+{region.get('rows')}x{region.get('cols')}"
    return f"{region['wafer']}:{where}" if region.get("wafer") else where


def format_reason(job: Mapping[str, object], *, wide: bool = False, reason: object = ...) -> str:
    """squeue's NODELIST(REASON) idea, in parentheses: why a job waits, or how it ended.

    Uses, first found: the scheduler's `reasons` (from /queue; the first code, or every
    message when wide), the error (its kind, or kind and message when wide), the `reason` of
    the job's last state change (`reason`, when given, in its place: a listing's shown
    reason). A running job's place is its REGION, so it shows `-`.
    """
    text = _reason_text(job, wide, job.get("reason") if reason is ... else reason)
    if not text:
        return "-"
    if not wide and len(text) > REASON_WIDTH:
        text = text[: REASON_WIDTH - 1] + "~"
    return f"({text})"


def _reason_text(job: Mapping[str, object], wide: bool, reason: object) -> str:
    reasons = job.get("reasons")
    if reasons and isinstance(reasons, list) and isinstance(reasons[0], dict):
        if wide:
            return "; ".join(str(r.get("message") or r.get("code")) for r in reasons)
        return str(reasons[0].get("code") or reasons[0].get("message"))
    error = job.get("error")
    if error and isinstance(error, dict):
        return f"{error.get('kind')}: {error.get('message')}" if wide else str(error.get("kind"))
    if job.get("state") == "running":
        return ""
    if isinstance(reason, dict):
        reason = reason.get("message") if wide else reason.get("code") or reason.get("message")
    return str(reason or "")


def format_progress(progress: Mapping[str, object] | None) -> str | None:
    """`step 5/100, loss 1.25`, or None before the first step."""
    if not progress or progress.get("step") is None:
        return None
    text = f"step {progress.get('step')}/{progress.get('total_steps')}"
    loss = progress.get("loss")
    return text + (f", loss {loss:.6g}" if isinstance(loss, int | float) else "")


def format_time(value: object, now: datetime | None = None) -> str:
    """An API time for people: `YYYY-MM-DD HH:MM:SS` UTC, plus `(in 5:00)` / `(3:00 ago)`."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    text = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if now is not None:
        delta = (moment - now).total_seconds()
        text += (
            f" (in {format_duration(delta)})" if delta >= 0 else f" ({format_duration(-delta)} ago)"
        )
    return text


def now_utc() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)
