"""Read a `job.yaml` safely and collect the files it names, ready to upload.

Job files in the plain YAML subset they are written in are read by client.quickyaml (exactly
as PyYAML would, without PyYAML's import); anything else by PyYAML's SafeLoader with two
refusals: anchors and aliases (an alias bomb, the "billion laughs", expands a few hundred bytes
into gigabytes) and duplicate keys (the second one would silently win, which is a typo that
must not pass)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from client import quickyaml
from client.cerebras_config import config_sections, merge_config
from client.errors import JobSpecError

TYPE_CHECKING = False  # typing's import is spared on `sam submit`'s path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# The spec fields that name a file uploaded with the job (docs/contract.md section 1).
MAX_JOB_FILE_BYTES = 1 << 20  # the server's default request limit; a spec is a few hundred bytes
FILE_FIELDS: tuple[tuple[str, str], ...] = (
    ("model", "file"),
    ("data", "file"),
    ("entry", "script"),
)


def parse_job_yaml(text: str, source: str = "<job file>") -> dict[str, Any]:
    """Parse job YAML text into a dict; raises JobSpecError naming the line on any problem.

    The plain subset job files are written in is read by client.quickyaml (PyYAML's import is a
    fifth of a short command's start-up); anything else, errors included, by PyYAML."""
    quick = quickyaml.parse(text)
    if quick is not None:
        return quick
    import yaml

    from client.yamlloader import NoAliasSafeLoader

    try:
        data = yaml.load(text, Loader=NoAliasSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except JobSpecError as exc:
        raise JobSpecError(f"{source}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise JobSpecError(f"{source}: invalid YAML at {where}{problem}") from None
    except yaml.YAMLError as exc:
        raise JobSpecError(f"{source}: invalid YAML: {exc}") from None
    except RecursionError:
        raise JobSpecError(f"{source}: the YAML is nested too deeply to be a job file") from None
    if data is None:
        raise JobSpecError(f"{source}: the job file is empty; see `sam submit --help`")
    if not isinstance(data, dict):
        raise JobSpecError(
            f"{source}: a job file is a mapping of keys (name:, model:, ...), "
            f"not a {type(data).__name__}"
        )
    return data


def collect_files(
    spec: Mapping[str, object],
    base_dir: Path,
    *,
    allow_outside: bool = False,
    on_outside: Callable[[str, Path], None] | None = None,
    origins: dict[str, Path] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Read every file the spec names, relative to `base_dir`.

    Without a project (`origins` None) the server keeps a job's files in one flat folder, so
    each is uploaded under its base name and the returned copy of the spec names it so
    (`src/model.py` becomes `model.py`). With one, a file inside `base_dir` keeps its path in
    the project (`src/model.py`), and `origins` gets {name sent: the file read}.
    A file outside `base_dir` (`../x`, an absolute path, a symlink leading out) is refused unless
    `allow_outside`; then `on_outside(field, path)` is told of each one.
    Returns (spec to send, {upload name: text}).
    """
    base = Path(base_dir).resolve()
    sent = dict(spec)
    files: dict[str, str] = {}
    seen = origins if origins is not None else {}
    for section, key in FILE_FIELDS:
        block = spec.get(section)
        name = block.get(key) if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(name, str) or not name:
            continue  # absent or mistyped: the server's validation names the field
        path = (base / name).resolve()  # resolve(): symlinks are judged by where they lead
        if not path.is_relative_to(base):
            _check_outside(f"{section}.{key}", name, path, base, allow_outside, on_outside)
        upload_name = path.name
        if origins is not None and path.is_relative_to(base):
            upload_name = path.relative_to(base).as_posix()
        if upload_name in seen and seen[upload_name] != path:
            raise JobSpecError(
                f"{section}.{key}: {name} and {seen[upload_name]} share the name "
                f"{upload_name!r}; jobs upload files into one folder, so rename one"
            )
        files[upload_name] = _read_text(path, f"{section}.{key}")
        seen[upload_name] = path
        sent[section] = {**block, key: upload_name}
    return sent, files


def _check_outside(
    field: str,
    name: str,
    path: Path,
    base: Path,
    allow: bool,
    on_outside: Callable[[str, Path], None] | None,
) -> None:
    """Refuse a file outside the job's folder, or report it when the user allowed that."""
    if not allow:
        raise JobSpecError(
            f"{field}: {name} is {path}, outside the job file's folder {base}; "
            "copy it next to the job file, or pass --allow-outside to upload it anyway"
        )
    if on_outside is not None:
        on_outside(field, path)


def _read_text(path: Path, field: str) -> str:
    if not path.is_file():
        raise JobSpecError(
            f"{field}: file not found: {path} (paths in a job file are relative to the "
            "job file's folder)"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise JobSpecError(
            f"{field}: {path} is not UTF-8 text; only text files are uploaded"
        ) from None
    except OSError as exc:
        raise JobSpecError(f"{field}: cannot read {path}: {exc.strerror}") from None


def read_yaml_file(path: Path, what: str = "job file") -> dict[str, object]:
    """Parse the YAML mapping in `path` with the job-file loader's refusals."""
    if not path.is_file():
        raise JobSpecError(f"{path}: no such {what}")
    size = path.stat().st_size
    if size > MAX_JOB_FILE_BYTES:
        raise JobSpecError(
            f"{path}: {size / 2**20:.1f} MiB is far too big for a {what}; a {what} is a "
            "short YAML file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise JobSpecError(f"{path}: not UTF-8 text; a {what} is YAML") from None
    except OSError as exc:
        raise JobSpecError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    return parse_job_yaml(text, source=str(path))


def load_job_file(
    path: Path,
    config: Path | None = None,
    *,
    allow_outside: bool = False,
    on_outside: Callable[[str, Path], None] | None = None,
    origins: dict[str, Path] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Read `path` as a job file: returns (spec to send, {file name: text} to upload).
    `origins` (with a project): filled with {file name: the file read} (see collect_files).

    The seed's cerebras_config.yaml keys are merged in from `config` (`--config`) and from a
    `cerebras_config:` key of the job file (a file name relative to it, or the keys inline).
    Files outside the job file's folder are refused unless `allow_outside` (see collect_files).
    """
    spec = read_yaml_file(path)
    spec = apply_cerebras_config(spec, path.resolve().parent, config)
    sent, files = collect_files(
        spec,
        path.resolve().parent,
        allow_outside=allow_outside,
        on_outside=on_outside,
        origins=origins,
    )
    requirements = path.resolve().parent / "requirements.txt"
    if requirements.is_file() and "requirements.txt" not in files:
        # checked at submit against the workers' packages (docs/data.md)
        files["requirements.txt"] = _read_text(requirements, "requirements.txt")
        if origins is not None:
            origins["requirements.txt"] = requirements
    return sent, files


def apply_cerebras_config(
    spec: Mapping[str, object], base_dir: Path, config: Path | None
) -> dict[str, object]:
    """`spec` without its `cerebras_config` key and with every named config merged in."""
    spec = dict(spec)
    named = spec.pop("cerebras_config", None)
    sources: list[tuple[dict[str, Any], str]] = []
    if isinstance(named, str):
        config_path = base_dir / named
        sources.append((read_yaml_file(config_path, "config file"), str(config_path)))
    elif isinstance(named, dict):
        sources.append((named, "job file's cerebras_config"))
    elif named is not None:
        raise JobSpecError(
            "cerebras_config: give a file name (relative to the job file) or a mapping of keys"
        )
    if config is not None:
        sources.append((read_yaml_file(config, "config file"), str(config)))
    for values, source in sources:
        spec = merge_config(spec, config_sections(values, source), source)
    return spec
