"""Submit-time checks of a spec and its files, so a job that can never run fails at once (422)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from pydantic import ValidationError

from sam_server.errors import InvalidSpec
from sam_server.schemas.job_spec import JobSpec


def safe_file_name(name: str) -> bool:
    """A relative path inside the job's directory: no absolute paths, `..`, backslashes or NULs."""
    if not name or len(name) > 255 or "\\" in name or "\x00" in name or name.startswith("/"):
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def validation_errors(exc: ValidationError, prefix: str = "spec") -> list[dict[str, str]]:
    """Pydantic errors as `[{field, message}]`, each naming its dotted field path."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if p not in ("function-after",))
        field = f"{prefix}.{loc}" if loc else prefix
        out.append({"field": field, "message": err["msg"]})
    return out


def parse_spec(raw: object) -> JobSpec:
    """`raw` as a `JobSpec`, or `InvalidSpec` naming every bad field."""
    if not isinstance(raw, dict):
        raise InvalidSpec("the job spec must be a mapping (job.yaml's top level)")
    try:
        return JobSpec.model_validate(raw)
    except ValidationError as exc:
        errors = validation_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise InvalidSpec(f"the job spec is invalid: {detail}", errors=errors) from exc


def check_files(spec: JobSpec, files: dict[str, str]) -> None:
    """Every file the spec names was uploaded, names are plain, and the Python parses and defines
    what the spec says it does (checked with `ast`: user code is never run in the server)."""
    errors: list[dict[str, str]] = []
    for name in files:
        if not safe_file_name(name):
            errors.append(
                {
                    "field": f"files.{name}",
                    "message": "file names must be plain relative paths (no '..' or '/' at the start)",
                }
            )
    wanted = {
        "spec.model.file": spec.model.file if spec.model else None,
        "spec.data.file": spec.data.file,
        "spec.entry.script": spec.entry.script if spec.entry else None,
    }
    for field, wanted_name in wanted.items():
        if wanted_name and wanted_name not in files:
            errors.append(
                {"field": field, "message": f"{wanted_name!r} was not uploaded with the job"}
            )
    if not errors:
        errors += _check_python(spec, files)
    if errors:
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise InvalidSpec(detail, errors=errors)


def _check_python(spec: JobSpec, files: dict[str, str]) -> list[dict[str, str]]:
    errors: list[dict[str, str]] = []
    needs: list[tuple[str, str, str, type]] = []
    model_file = spec.model.file if spec.model else None
    if spec.model and spec.model.file and spec.model.class_:
        needs.append(("spec.model.class", spec.model.file, spec.model.class_, ast.ClassDef))
    if spec.entry is not None:
        try:
            ast.parse(files[spec.entry.script], filename=spec.entry.script)
        except SyntaxError as exc:
            errors.append(
                {"field": f"files.{spec.entry.script}", "message": f"line {exc.lineno}: {exc.msg}"}
            )
    if spec.data.source == "file" and spec.data.function:
        data_file = spec.data.file or model_file
        if data_file:
            needs.append(("spec.data.function", data_file, spec.data.function, ast.FunctionDef))
    for field, fname, symbol, kind in needs:
        try:
            tree = ast.parse(files[fname], filename=fname)
        except SyntaxError as exc:
            errors.append({"field": f"files.{fname}", "message": f"line {exc.lineno}: {exc.msg}"})
            continue
        names = {getattr(n, "name", "") for n in tree.body if isinstance(n, kind)}
        if symbol not in names:
            what = "class" if kind is ast.ClassDef else "function"
            errors.append(
                {"field": field, "message": f"{fname} defines no top-level {what} {symbol!r}"}
            )
    return errors


def check_factory(spec: JobSpec, packages: Sequence[str], own_files: Iterable[str]) -> None:
    """A model.factory names a callable of an allowed package (`model_factory_packages`) or of a
    module the job brings (an uploaded or project file `top.py` or folder `top/`); the compile
    sandbox imports it and checks the rest (importable, defined there, returns an nn.Module)."""
    if spec.model is None or not spec.model.factory:
        return
    top = spec.model.factory.split(".")[0]
    if top in packages or any(f == f"{top}.py" or f.startswith(f"{top}/") for f in own_files):
        return
    message = (
        f"{top!r} is not a package models may be built from (allowed: {', '.join(packages)}, "
        "or a module of the job's own project); wrap the model in a class in your model file"
    )
    raise InvalidSpec(
        f"spec.model.factory: {message}",
        errors=[{"field": "spec.model.factory", "message": message}],
    )
