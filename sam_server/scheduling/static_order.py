"""The waiting jobs in their time-invariant order (eligible, submitted, id), kept between cycles.

A memo for `plugins.priority_sort`: the plan never depends on it, only the work does.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import fields
from itertools import compress
from operator import attrgetter

from sam_server.scheduling.model import JobId, PolicyJob

_ALL_BUT_ID = attrgetter(*(f.name for f in fields(PolicyJob) if f.name != "id"))
"""A job's every field but its id: jobs equal in it have equal priorities."""
_FEW_NEW = 64
"""New jobs inserted one by one (bisect) into the kept order; more are merged by a sort."""


class StaticOrder:
    """The waiting jobs of the last plan in (eligible_at, submitted_at, id) order, with each
    job's group (see _ALL_BUT_ID) and one job of every group. A memo: the plan never depends
    on it, only the work does. Jobs are frozen, so one object always has one key and group."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[list[PolicyJob], list[int], set[int]] = ([], [], set())
        self._group_ids: dict[tuple[object, ...], int] = {}
        self._members: list[PolicyJob] = []

    def order(self, waiting: list[PolicyJob]) -> tuple[list[PolicyJob], list[int], list[PolicyJob]]:
        """(`waiting` in static order, each one's group, one job of each group)."""
        with self._lock:
            return self._order(waiting)

    def _order(
        self, waiting: list[PolicyJob]
    ) -> tuple[list[PolicyJob], list[int], list[PolicyJob]]:
        last, last_groups, seen = self._last  # `seen`: the ids of `last`
        now = set(map(id, waiting))
        if len(now) < len(waiting):  # one object twice (never from a snapshot): no memo
            self._last = ([], [], set())
            jobs = sorted(waiting, key=static_key)
            return jobs, list(range(len(jobs))), jobs
        if len(self._members) > 2 * len(waiting) + 1024:  # forget the groups of ended jobs
            self._group_ids, self._members, last, last_groups, seen = {}, [], [], [], set()
        keep = list(map(now.__contains__, map(id, last)))
        kept, groups = list(compress(last, keep)), list(compress(last_groups, keep))
        if len(kept) < len(waiting):
            new = [j for j in waiting if id(j) not in seen]
            if len(new) <= _FEW_NEW:
                for job in sorted(new, key=static_key):
                    at = bisect.bisect_left(kept, static_key(job), key=static_key)
                    kept.insert(at, job)
                    groups.insert(at, self._group(job))
            else:
                merged = kept + new
                merged_groups = groups + [self._group(j) for j in new]
                keys = list(map(static_key, merged))
                index = sorted(range(len(merged)), key=keys.__getitem__)
                kept = list(map(merged.__getitem__, index))
                groups = list(map(merged_groups.__getitem__, index))
        self._last = (kept, groups, now)
        return kept, groups, self._members

    def _group(self, job: PolicyJob) -> int:
        key = _ALL_BUT_ID(job)
        found = self._group_ids.get(key)
        if found is None:
            found = self._group_ids[key] = len(self._members)
            self._members.append(job)
        return found


def static_key(job: PolicyJob) -> tuple[float | JobId, ...]:
    return (job.eligible_at, job.submitted_at, job.id)


STATIC = StaticOrder()
"""The one memo of the process (plans of one process share it; it holds a lock)."""
