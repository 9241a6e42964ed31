"""`sam queue` without click: the command a user types most, and squeue answers in milliseconds.

Importing click (and typing, inspect, uuid with it) took longer than the server's answer for an
array's one line. The console script (client.entry) hands a `sam [--url U] [--token T]
[--context C] queue [options]` call here first. This module reads the table's options (--all,
-t/--state, -u/--user, --me, --tenant, -r/--array, -j/--jobs, --noheader, --url, --token),
asks the same SamClient and draws the same table with the same functions (client.queue_view).
Anything else (--help, --watch, --format, -o, an unknown or malformed option, an unknown state)
it declines before anything is sent or printed, and click's full command runs instead, with its
usage errors.
"""

from __future__ import annotations

import os
import sys

from client.fastpath import GLOBAL_VALUES, _take, api_error_lines

TYPE_CHECKING = False  # typing's import is spared on this path
if TYPE_CHECKING:
    from typing import Any

    from client.config import ClientConfig

QUEUE_VALUES = {
    "--state": "state",
    "-t": "state",
    "--user": "user",
    "-u": "user",
    "--tenant": "tenant",
    "--jobs": "jobs",
    "-j": "jobs",
    "--url": "url",
    "--token": "token",
}
QUEUE_FLAGS = {
    "--all": "all",
    "--me": "me",
    "--array": "array",
    "-r": "array",
    "--no-headers": "no_headers",
    "--noheader": "no_headers",
}
REPEATED = ("state", "jobs")  # click's multiple=True options: every value counts


def parse_queue_args(argv: list[str]) -> dict[str, Any] | None:
    """The options of a `sam ... queue ...` command line, or None when this path declines it."""
    top: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "queue":
        i = _take(argv, i, GLOBAL_VALUES, {}, top)
        if i < 0:
            return None
    if i == len(argv):
        return None
    found: dict[str, Any] = {key: [] for key in REPEATED}
    i += 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            return None  # `sam queue` takes no argument: click explains
        one: dict[str, Any] = {}
        i = _take(argv, i, QUEUE_VALUES, QUEUE_FLAGS, one)
        if i < 0:
            return None
        for key, value in one.items():
            if key in REPEATED:
                found[key].append(value)
            else:
                found[key] = value
    for key in ("url", "token"):  # the subcommand's flag wins over sam's own
        found[key] = found.get(key) or top.get(key)
    found["context"] = top.get("context") or None  # else resolve_config reads SAM_CONTEXT
    return found


def queue_quickly(argv: list[str]) -> int | None:
    """Run `sam queue` for `argv` and return its exit status; None: not handled here (nothing
    was sent or printed), run click's command instead."""
    args = parse_queue_args(argv)
    if args is None:
        return None
    from client.queue_view import display_key, queue_table, states_from
    from client.sdk import ACTIVE_STATES

    try:
        states = states_from(args["state"]) or ([] if args.get("all") else list(ACTIVE_STATES))
    except ValueError:
        return None  # click's usage error says it
    jobs_wanted = [j for value in args["jobs"] for j in value.replace(",", " ").split()]
    from client.config import resolve_config
    from client.errors import SamAPIError, SamClientError
    from client.sdk import SamClient

    config: ClientConfig | None = None
    try:
        config = resolve_config(args["url"], args["token"], context=args["context"])
        with SamClient(config.url, config.token) as client:
            user = args.get("user")
            if args.get("me"):
                user = str(client.whoami()["name"])
            jobs = list(
                client.list_rows(
                    states=states,
                    user=user,
                    tenant=args.get("tenant"),
                    jobs=jobs_wanted,
                    expand_arrays=bool(args.get("array")) or bool(jobs_wanted),
                )
            )
    except SamAPIError as exc:
        _stderr("\n".join(api_error_lines(exc, config)))
        return 1
    except SamClientError as exc:
        _stderr(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _stderr("\nAborted!")  # click's words for an interrupted command
        return 1
    jobs.sort(key=display_key)
    text = queue_table(jobs, wide=False, no_headers=bool(args.get("no_headers")))
    try:
        if text:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `sam queue | head`: as click's main, no traceback, status 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
