"""client.quickyaml must read job files exactly as PyYAML's SafeLoader does, or decline (None).

A wrong answer here would submit a different job than the file says, so besides the repository's
own job files, thousands of generated documents built from YAML 1.1's traps (octal, sexagesimal,
`1e5` strings, yes/no/on/off, timestamps, `.5`, quoting, comments) are compared with PyYAML.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from client import quickyaml
from client.jobspec import parse_job_yaml

ROOT = Path(__file__).resolve().parents[2]
JOB_FILES = sorted(p for p in (ROOT / "examples").rglob("*.yaml"))

# Scalars whose YAML 1.1 meaning is easy to get wrong.
TRAPS = [
    "5m",
    "10m",
    "1h",
    "30s",
    "2d",
    "0",
    "-0",
    "+5",
    "12",
    "007",
    "0x1f",
    "0o17",
    "0b101",
    "1_000",
    "1:20",
    "1:20:30",
    "1.5",
    "-1.5",
    "+1.5",
    "1.",
    ".5",
    "-.5",
    "1e5",
    "1e-5",
    "1.0e5",
    "1.0e-5",
    "1.5E+3",
    ".inf",
    "-.inf",
    ".nan",
    ".NaN",
    "2001-12-14",
    "2001-12-14 21:59:43.10",
    "2001-12-14t21:59:43.10-05:00",
    "yes",
    "no",
    "Yes",
    "NO",
    "on",
    "Off",
    "y",
    "n",
    "true",
    "False",
    "TRUE",
    "null",
    "Null",
    "~",
    "none",
    "None",
    "mlp",
    "model.py",
    "./model.py",
    "../x.py",
    "a b",
    "a  b",
    "a#b",
    "sgd",
    "cross_entropy",
    "http://x/y",
    "a:b",
    "-foo",
    "-",
    "--x",
    "=",
    "<<",
    "%x",
    "@x",
    "`x`",
    "!x",
    "&a",
    "*a",
    "|",
    ">",
    "?",
    "?x",
    "'q'",
    "'it''s'",
    '"dq"',
    '"a\\tb"',
    "'a # b'",
    "'a: b'",
    "[]",
    "{}",
    "x,y",
    "a[0]",
    "${SAM_ARRAY_TASK_ID}",
    "lr_${SAM_ARRAY_TASK_ID}",
    "0.001",
    "3.14159",
    "1.5e-3",
    "123456789012345678901234567890",
]
COMMON = [
    "5m",
    "12",
    "-3",
    "0.5",
    "1.5e-3",
    "true",
    "no",
    "~",
    "mlp",
    "a b",
    "'q'",
    '"dq"',
    "./m.py",
]
KEYS = ["name", "model", "lr", "on", "yes", "y", "n", "x1", "_k", "a.b", "a-b", "null", "1a", "k k"]


def same_as_pyyaml(text: str) -> None:
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        expected = "<error>"
    got = quickyaml.parse(text)
    if got is not None:
        assert isinstance(expected, dict), text
        assert got == expected, text
        assert repr(got) == repr(expected), text  # 1 vs 1.0 vs True: types must match too


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_job_file_is_read_quickly_and_exactly(path: Path) -> None:
    text = path.read_text()
    assert quickyaml.parse(text) == yaml.safe_load(text)
    assert quickyaml.parse(text) is not None  # the examples are the common case: no fallback


@pytest.mark.parametrize("scalar", TRAPS)
def test_each_trap_scalar_is_resolved_as_pyyaml_does_or_declined(scalar: str) -> None:
    for text in (
        f"k: {scalar}\n",
        f"k: [{scalar}]\n",
        f"k: {{a: {scalar}}}\n",
        f"k:\n- {scalar}\n",
        f"k:\n  - {scalar}\n",
        f"k: {scalar} # note\n",
        f"k: [{scalar}, 1]\n",
    ):
        same_as_pyyaml(text)


def test_common_values_are_not_declined() -> None:
    text = "a: 5m\nb: 12\nc: 0.001\nd: true\ne: ~\nf: 'q'\ng: [1, 8, 8]\nh: {x: sgd}\n"
    assert quickyaml.parse(text) == {
        "a": "5m",
        "b": 12,
        "c": 0.001,
        "d": True,
        "e": None,
        "f": "q",
        "g": [1, 8, 8],
        "h": {"x": "sgd"},
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        "- a\n- b\n",
        "just a scalar\n",
        "a: 1\na: 2\n",  # duplicate key: the job-file loader names it
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: |\n  text\n",
        "a: b\n  c\n",  # a continued plain scalar
        "a:\n  b: 1\n c: 2\n",  # a bad dedent
        "a: 1\n\tb: 2\n",
        "a: [1, 2\n",
        "a: [1,, 2]\n",
        "a: [1, 2,]\n",
        "a: {b: 1, b: 2}\n",
        "a: {b:1}\n",
        "a: 'unterminated\n",
        "a: b: c\n",
        "a:\n  - 1\n  b: 2\n",
        "---\na: 1\n",
        "a: caf\u00e9\n",
        "a: 1\r\nb: 2\r\n",
        "  a: 1\n",
        "a:b\n",
    ],
)
def test_what_it_cannot_be_sure_of_is_declined(text: str) -> None:
    assert quickyaml.parse(text) is None


def test_declined_files_still_get_the_job_file_errors() -> None:
    from client.errors import JobSpecError

    with pytest.raises(JobSpecError, match="duplicate key 'a'"):
        parse_job_yaml("a: 1\na: 2\n")
    with pytest.raises(JobSpecError, match="anchor"):
        parse_job_yaml("a: &x 1\nb: *x\n")


def _random_document(rng: random.Random) -> str:
    lines: list[str] = []

    def scalar() -> str:
        return rng.choice(TRAPS if rng.random() < 0.1 else COMMON)

    def flow(depth: int) -> str:
        if depth > 2 or rng.random() < 0.5:
            return scalar()
        if rng.random() < 0.5:
            return "[" + ", ".join(flow(depth + 1) for _ in range(rng.randint(0, 3))) + "]"
        keys = rng.sample(KEYS, rng.randint(0, 3))
        return "{" + ", ".join(f"{k}: {flow(depth + 1)}" for k in keys) + "}"

    def block(indent: int, depth: int) -> None:
        pad = " " * indent
        for key in rng.sample(KEYS, rng.randint(1, 4)):
            kind = rng.random()
            if depth < 3 and kind < 0.25:
                lines.append(f"{pad}{key}:")
                block(indent + rng.choice([1, 2, 4]), depth + 1)
            elif kind < 0.35:
                lines.append(f"{pad}{key}:")
                step = rng.choice([0, 2])
                for _ in range(rng.randint(1, 3)):
                    lines.append(f"{pad}{' ' * step}- {flow(1)}")
            else:
                comment = rng.choice(["", "", " # c", "  #c"])
                lines.append(f"{pad}{key}: {flow(0)}{comment}")
            if rng.random() < 0.1:
                lines.append(rng.choice(["", "# note", "   # indented note"]))

    block(0, 0)
    return "\n".join(lines) + rng.choice(["\n", "", "\n\n"])


def test_generated_documents_agree_with_pyyaml() -> None:
    rng = random.Random(13)
    read_quickly = 0
    for _ in range(3000):
        text = _random_document(rng)
        same_as_pyyaml(text)
        read_quickly += quickyaml.parse(text) is not None
    assert read_quickly > 400  # the comparison must cover documents it does read
