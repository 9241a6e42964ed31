"""Run the compiler for one claimed job; turn its errors into (kind, message)."""

from __future__ import annotations

import logging
from pathlib import Path

from compiler.arch import normalize_arch
from compiler.sandbox.limits import SandboxLimits
from sam_domain.compile import CompiledArtifact
from sam_domain.run import RunSpec
from sam_server.config import Settings
from sam_server.errors import SamError
from sam_server.services.datasets import dataset_mounts
from sam_server.services.lifecycle import Claim
from sam_server.services.uploads import project_dir

log = logging.getLogger("sam.worker.compile")


def artifact_root(settings: Settings) -> Path:
    """The artifact store (a directory: a shared volume in compose, NFS across hosts)."""
    root = (settings.data_dir / "artifacts").resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def job_project(claim: Claim, settings: Settings) -> Path | None:
    """The job's project folder on this machine (docs/projects.md); None without one."""
    digest = RunSpec.of(claim.spec).project
    if not digest:
        return None
    return project_dir(settings, claim.tenant, str(digest))


def job_datasets(claim: Claim, settings: Settings) -> dict[str, Path]:
    """{name: host path} of the data sets the job names, resolved for its own tenant."""
    return dataset_mounts(settings, claim.tenant, list(RunSpec.of(claim.spec).datasets))


def runner_datasets(claim: Claim, settings: Settings) -> dict[str, Path]:
    """The data sets a runner job names, bound in its compile sandbox too: its script runs there
    up to its first batch (docs/runner.md). A model job's compile never reads data."""
    if not claim.spec.get("entry"):
        return {}
    return job_datasets(claim, settings)


def run_compile(
    claim: Claim, settings: Settings
) -> tuple[CompiledArtifact | None, tuple[str, str] | None]:
    """(result, None) on success, (None, (kind, message)) on a compile failure."""
    import compiler
    from compiler.errors import CompileError

    wanted = RunSpec.of(claim.spec)
    root = artifact_root(settings)
    try:
        project = job_project(claim, settings)
        datasets = runner_datasets(claim, settings)
    except SamError as exc:  # the project or a data set was removed since the submit
        return None, ("invalid_spec", str(exc))
    try:
        result = compiler.compile_job(
            claim.spec,
            claim.files,
            region=(claim.rows, claim.cols),
            cache_dir=root,
            arch=normalize_arch(wanted.target_device),
            mode=wanted.mode,
            namespace=f"tenant-{claim.tenant_id}",
            project=project,
            datasets=datasets,
            limits=SandboxLimits(factory_packages=tuple(settings.model_factory_packages)),
        )
    except CompileError as exc:
        return None, (exc.kind, exc.message)
    except Exception as exc:  # noqa: BLE001 - a compiler bug must fail the job, not the worker
        log.exception("compile of %s crashed", claim.job_id)
        return None, ("internal", f"the compiler crashed: {type(exc).__name__}: {exc}")
    artifact = None
    if result.artifact_dir is not None:
        artifact = str(Path(result.artifact_dir).resolve().relative_to(root))
    summary = result.summary.copy()
    summary["artifact_path"] = artifact
    return CompiledArtifact(
        artifact or result.cache_key, bool(result.cache_hit), float(result.seconds), summary
    ), None
