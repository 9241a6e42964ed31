"""YAML for untrusted specs: size-capped, anchors and aliases refused (the "billion laughs" bomb)."""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_BYTES = 256 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors and aliases instead of expanding them."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise yaml.YAMLError(
                f"line {mark.line + 1}, column {mark.column + 1}: YAML anchors and aliases "
                "(&name / *name) are not allowed in a job spec; write the values out"
            )
        return super().compose_node(parent, index)


def load_spec_yaml(text: str) -> Any:
    """Parse `text` safely; raise ValueError with the line and column of the problem."""
    if len(text.encode()) > MAX_YAML_BYTES:
        raise ValueError(f"the job spec is over {MAX_YAML_BYTES // 1024} KiB")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ValueError(f"malformed YAML: {where}{exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc
