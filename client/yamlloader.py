"""PyYAML's SafeLoader with the job file's refusals (imported only when client.quickyaml cannot
read a file: PyYAML's import is a large part of a short command's start-up)."""

from __future__ import annotations

from typing import Any

import yaml

from client.errors import JobSpecError

MAX_FLOW_NESTING = 32


class NoAliasSafeLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors, aliases and duplicate mapping keys."""

    def compose_node(self, parent: Any, index: Any) -> object:  # noqa: D102 - PyYAML hook
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            kind = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
            sigil = "*" if kind == "alias" else "&"
            raise JobSpecError(
                f"line {event.start_mark.line + 1}, column {event.start_mark.column + 1}: "
                f"YAML {kind} {sigil}{anchor} is not allowed in a job file; "
                "write the value out in full"
            )
        return super().compose_node(parent, index)

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803 - PyYAML hook
        # PyYAML's scanner is quadratic in the depth of nested [ ] / { }: a few kilobytes of
        # brackets would take minutes, so refuse depth no job spec needs.
        if self.flow_level >= MAX_FLOW_NESTING:
            mark = self.get_mark()
            raise JobSpecError(
                f"line {mark.line + 1}, column {mark.column + 1}: [ ] and {{ }} are nested more "
                f"than {MAX_FLOW_NESTING} deep; a job spec needs only a few levels"
            )
        super().fetch_flow_collection_start(TokenClass)

    def construct_mapping(self, node: Any, deep: bool = False) -> object:  # noqa: D102
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue  # unhashable keys are rejected by PyYAML itself
            if first is not None:
                raise JobSpecError(
                    f"line {line}: duplicate key {key!r} (first given on line {first}); "
                    "keep only one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)
