"""The `sam` console script: `sam submit` takes client.fastpath and `sam queue` client.fastqueue
(no click), the rest client.cli.

A shell loop of submits, or a queue looked at every second, is mostly Python start-ups, so this
module imports nothing but sys before it knows which path a command line takes."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run `sam` with `argv` (default: the process's arguments); exits with the command's status."""
    args = sys.argv[1:] if argv is None else argv
    if "submit" in args:
        from client.fastpath import submit_quickly

        status = submit_quickly(args)
        if status is not None:
            raise SystemExit(status)
    elif "queue" in args:
        from client.fastqueue import queue_quickly

        status = queue_quickly(args)
        if status is not None:
            raise SystemExit(status)
    from client.cli import main as click_main

    click_main(args)
