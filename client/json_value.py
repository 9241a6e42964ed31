"""A JSON value as json.loads returns it (an API answer, a job spec): code that walks one checks
each part's type (isinstance) before it uses it. The client's own copy of sam_domain's: the
client installs without the server's packages."""

from __future__ import annotations

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
"""Any JSON value."""
