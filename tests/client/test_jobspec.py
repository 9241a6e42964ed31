"""Reading job files safely: alias bombs, malformed YAML, duplicate keys, missing files."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.errors import JobSpecError
from client.jobspec import load_job_file, parse_job_yaml

BILLION_LAUGHS = """\
name: bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: [*d,*d,*d,*d,*d,*d,*d,*d,*d]
"""


def test_alias_bomb_is_refused_naming_the_line() -> None:
    with pytest.raises(
        JobSpecError, match=r"job\.yaml: line 2, column 4: YAML anchor &a is not allowed"
    ):
        parse_job_yaml(BILLION_LAUGHS, source="job.yaml")


def test_alias_without_anchor_is_refused() -> None:
    with pytest.raises(JobSpecError, match="line 2.*alias"):
        parse_job_yaml("name: x\nmodel: *m\n")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: x\nmodel: [1, 2\nmode: train\n", 3),
        ("name: x\n  bad: indent\n", 2),
        ('name: "x\n', 2),
    ],
)
def test_malformed_yaml_names_line_and_column(text: str, line: int) -> None:
    with pytest.raises(JobSpecError, match=rf"invalid YAML at line {line}, column \d+"):
        parse_job_yaml(text)


def test_python_tags_and_deep_nesting_are_refused_cleanly() -> None:
    with pytest.raises(JobSpecError, match="line 1, column 4: could not determine a constructor"):
        parse_job_yaml("a: !!python/object/apply:os.system [echo hi]\n")
    with pytest.raises(JobSpecError, match="line 1, column 36: .* nested more than 32 deep"):
        parse_job_yaml("a: " + "[" * 50_000 + "]" * 50_000 + "\n")  # quadratic to scan if let in
    indented = "".join(" " * depth + f"k{depth}:\n" for depth in range(1500))
    with pytest.raises(JobSpecError, match="nested too deeply"):
        parse_job_yaml(indented + " " * 1500 + "x: 1\n")


def test_oversized_job_file_is_refused_before_parsing(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\n" + "# padding\n" * 200_000)
    with pytest.raises(JobSpecError, match="too big for a job file"):
        load_job_file(job)


def test_duplicate_key_is_refused() -> None:
    with pytest.raises(
        JobSpecError, match="line 4: duplicate key 'lr' \\(first given on line 3\\)"
    ):
        parse_job_yaml("train:\n  optimizer:\n    lr: 0.1\n    lr: 0.2\n")


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_job_file_must_be_a_mapping(text: str) -> None:
    with pytest.raises(JobSpecError, match="empty|mapping"):
        parse_job_yaml(text)


def test_named_files_are_read_relative_to_the_job_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text("class Net: pass\n")
    (tmp_path / "data.py").write_text("def make_batch(step, batch_size): ...\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: x\nmodel: {file: src/model.py, class: Net}\ndata: {source: file, file: data.py}\n"
    )
    monkeypatch.chdir("/")  # the current folder must not matter
    spec, files = load_job_file(job)
    assert spec["model"] == {"file": "model.py", "class": "Net"}  # uploads are one flat folder
    assert spec["data"] == {"source": "file", "file": "data.py"}
    assert files == {
        "model.py": "class Net: pass\n",
        "data.py": "def make_batch(step, batch_size): ...\n",
    }


def test_two_named_files_with_one_base_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "code.py").write_text("x = 1\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: x\nmodel: {file: a/code.py, class: Net}\ndata: {source: file, file: b/code.py}\n"
    )
    with pytest.raises(JobSpecError, match="share the name 'code.py'"):
        load_job_file(job)


def test_missing_named_file_names_field_and_path(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nmodel: {file: nope.py, class: Net}\n")
    with pytest.raises(JobSpecError, match=rf"model\.file: file not found: {tmp_path}/nope\.py"):
        load_job_file(job)


def test_builtin_model_uploads_nothing(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nmodel: {builtin: mlp}\n")
    assert load_job_file(job) == ({"name": "x", "model": {"builtin": "mlp"}}, {})
