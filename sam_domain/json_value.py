"""A JSON value as json.loads returns it (a spec, an IR argument, a stored JSON column): code that
walks one checks each part's type (isinstance) before it uses it."""

from __future__ import annotations

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
"""Any JSON value."""

JsonObject = dict[str, JsonValue]
"""A JSON object."""
