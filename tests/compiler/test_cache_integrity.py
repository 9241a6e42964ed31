"""The compile cache per tenant (no cross-tenant hits) and artifacts checked on every load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler import compile_job, load_artifact
from compiler.errors import ArtifactCorrupt
from tests.compiler.conftest import make_spec
from tests.compiler.test_compile_job import SMALL_MLP


def _compile(cache: Path, tenant: str | None):  # type: ignore[no-untyped-def]
    spec = make_spec("mlp", **SMALL_MLP)
    return compile_job(spec, {}, region=(6, 5), cache_dir=cache, namespace=tenant)


def _poison(artifact_dir: Path) -> None:
    """What the hostile model of issue 10 did: NaNs into another tenant's init.npz."""
    path = artifact_dir / "init.npz"
    with np.load(path) as npz:
        tensors = {k: np.full_like(npz[k], np.nan) for k in npz.files}
    np.savez(path, **tensors)


def test_another_tenants_identical_compile_is_not_a_cache_hit(tmp_path: Path) -> None:
    first = _compile(tmp_path, "tenant-1")
    assert first.cache_hit is False
    other = _compile(tmp_path, "tenant-2")
    assert other.cache_hit is False and other.artifact_dir != first.artifact_dir
    again = _compile(tmp_path, "tenant-1")
    assert again.cache_hit is True and again.artifact_dir == first.artifact_dir
    assert again.seconds < 0.05  # same-tenant reuse is still a cheap hit


def test_a_poisoned_cached_artifact_is_recompiled_not_reused(tmp_path: Path) -> None:
    first = _compile(tmp_path, "victim")
    good = load_artifact(first.artifact_dir, expected_digest=first.summary["artifact_sha256"])
    _poison(first.artifact_dir)
    with pytest.raises(ArtifactCorrupt, match="init.npz"):
        load_artifact(first.artifact_dir)
    again = _compile(tmp_path, "victim")
    assert again.cache_hit is False  # rebuilt, and the poisoned copy set aside
    rebuilt = load_artifact(again.artifact_dir, expected_digest=again.summary["artifact_sha256"])
    for name, value in good.tensors.items():
        np.testing.assert_array_equal(rebuilt.tensors[name], value)
    assert list((tmp_path / "artifacts" / ".quarantine").iterdir())


def test_a_rewritten_manifest_does_not_match_the_recorded_digest(tmp_path: Path) -> None:
    first = _compile(tmp_path, "victim")
    manifest = first.artifact_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"fp16": false', '"fp16": true'))
    with pytest.raises(ArtifactCorrupt, match="manifest.json"):
        load_artifact(first.artifact_dir, expected_digest=first.summary["artifact_sha256"])
