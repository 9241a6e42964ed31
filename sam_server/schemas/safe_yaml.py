"""YAML for untrusted specs: size-capped, anchors and aliases refused (the "billion laughs" bomb),
nesting bounded (a RecursionError in the composer was a 500), numbers finite and no NUL text."""

from __future__ import annotations

from typing import Any

import yaml

from sam_server.schemas.numbers import MAX_DEPTH, TreeError, check_tree

MAX_YAML_BYTES = 256 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors and aliases instead of expanding them, and collections
    nested deeper than `MAX_DEPTH`."""

    _depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise yaml.YAMLError(
                f"line {mark.line + 1}, column {mark.column + 1}: YAML anchors and aliases "
                "(&name / *name) are not allowed in a job spec; write the values out"
            )
        if self._depth >= MAX_DEPTH:
            mark = event.start_mark
            raise yaml.YAMLError(
                f"line {mark.line + 1}, column {mark.column + 1}: the spec is nested deeper "
                f"than {MAX_DEPTH} levels"
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_spec_yaml(text: str) -> Any:
    """Parse `text` safely; raise ValueError with the line and column (or the field) of the
    problem."""
    if len(text.encode()) > MAX_YAML_BYTES:
        raise ValueError(f"the job spec is over {MAX_YAML_BYTES // 1024} KiB")
    try:
        value = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ValueError(f"malformed YAML: {where}{exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc
    except RecursionError:  # a parser stage deeper than the composer's bound
        raise ValueError(f"the spec is nested deeper than {MAX_DEPTH} levels") from None
    try:
        check_tree(value)
    except TreeError as exc:
        raise ValueError(f"spec.{exc}" if exc.field != "body" else str(exc)) from None
    return value
