"""Times as Slurm's sacct and sreport take them (`--starttime now-7days`, `2026-11-01T08:00`).

Accepted, as in `man sacct` (local time, like Slurm; the result carries its UTC offset):
`now[{+|-}COUNT[seconds|minutes|hours|days|weeks]]`, `today`, `midnight`, `noon`, `elevenses`,
`fika`, `teatime`, `YYYY-MM-DD[THH:MM[:SS]]`, `MMDD[YY][-HH:MM[:SS]]`, `MM/DD[/YY][-HH:MM[:SS]]`,
`MM.DD[.YY][-HH:MM[:SS]]`, `HH:MM[:SS][AM|PM]` (today), and an ISO 8601 time with its offset.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from client.errors import SamClientError

UNITS = {
    "": 1,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
NAMED_HOURS = {"midnight": 0, "today": 0, "noon": 12, "elevenses": 11, "fika": 15, "teatime": 16}
_RELATIVE = re.compile(r"now(?:([+-])(\d+)([a-z]*))?")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?")
_DATE_FORMS = (
    re.compile(r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?:[t ](?P<t>.+))?"),
    re.compile(r"(?P<m>\d{2})(?P<d>\d{2})(?P<y>\d{2})?(?:-(?P<t>.+))?"),
    re.compile(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})(?:/(?P<y>\d{2,4}))?(?:-(?P<t>.+))?"),
    re.compile(r"(?P<m>\d{1,2})\.(?P<d>\d{1,2})(?:\.(?P<y>\d{2,4}))?(?:-(?P<t>.+))?"),
)


class SlurmTimeError(SamClientError):
    """A time that none of Slurm's formats matches."""


def parse_slurm_time(text: str, now: datetime | None = None) -> datetime:
    """The aware datetime `text` names (see the module docstring for the formats)."""
    now = (now or datetime.now()).astimezone()
    value = text.strip().lower()
    if (relative := _RELATIVE.fullmatch(value)) is not None:
        sign, count, unit = relative.groups()
        if sign is None:
            return now
        if unit not in UNITS:
            raise _error(text, f"unknown unit {unit!r}")
        seconds = int(count) * UNITS[unit]
        return now + timedelta(seconds=seconds if sign == "+" else -seconds)
    if value in NAMED_HOURS:
        return now.replace(hour=NAMED_HOURS[value], minute=0, second=0, microsecond=0)
    if _CLOCK.fullmatch(value):
        return _at_clock(now, value, text)
    for form in _DATE_FORMS:
        match = form.fullmatch(value)
        if match is not None:
            return _at_date(now, match, text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _error(text, "no Slurm time format matches") from None
    return moment if moment.tzinfo else moment.astimezone()


def _at_clock(day: datetime, clock: str, text: str) -> datetime:
    match = _CLOCK.fullmatch(clock)
    if match is None:
        raise _error(text, f"bad time of day {clock!r}")
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    if match[4] == "pm" and hour < 12:
        hour += 12
    elif match[4] == "am" and hour == 12:
        hour = 0
    try:
        return day.replace(hour=hour, minute=minute, second=second, microsecond=0)
    except ValueError as exc:
        raise _error(text, str(exc)) from None


def _at_date(now: datetime, match: re.Match[str], text: str) -> datetime:
    year = match["y"]
    full_year = now.year if year is None else int(year) + (2000 if len(year) == 2 else 0)
    try:
        day = now.replace(
            year=full_year,
            month=int(match["m"]),
            day=int(match["d"]),
            hour=0,
            minute=0,
            second=0,
            microsecond=0,
        )
    except ValueError as exc:
        raise _error(text, str(exc)) from None
    return _at_clock(day, match["t"], text) if match["t"] else day


def _error(text: str, why: str) -> SlurmTimeError:
    return SlurmTimeError(
        f"cannot read the time {text!r} ({why}); use e.g. now-7days, today, 2026-11-01, "
        "2026-11-01T08:30, 11/01-08:30 or 08:30"
    )
