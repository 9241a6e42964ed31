"""scripts/any_count.py counts what it says: uses of `Any`, and the `dict[str, Any]` among them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("any_count", ROOT / "scripts" / "any_count.py")
assert spec is not None and spec.loader is not None
any_count = importlib.util.module_from_spec(spec)
spec.loader.exec_module(any_count)


def test_counts_uses_not_imports() -> None:
    source = (
        "from typing import Any\nimport typing\n"
        "def f(a: Any, b: dict[str, Any], c: typing.Any) -> Mapping[str, Any]: ...\n"
        "x: dict[str, int] = {}\n"
    )
    assert any_count.counts(source) == (4, 2)


def test_the_script_prints_one_json_line_of_totals() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "any_count.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    totals = json.loads(done.stdout.strip().splitlines()[-1])
    per_package = any_count.tally(ROOT)
    assert totals["any"] == sum(a for a, _ in per_package.values()) > 0
    assert totals["dict_str_any"] == sum(d for _, d in per_package.values())
    assert per_package["sam_domain"][0] <= 10  # the shared vocabulary is typed
