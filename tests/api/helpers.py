"""Small helpers for API tests: admin calls, tenants with users, a minimal valid spec."""

from __future__ import annotations

from typing import Any

from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

MODEL_PY = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc = nn.Linear(8, hidden)

    def forward(self, x):
        return self.fc(x)
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_tenant(client, name: str, **quota: Any) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/tenants", json={"name": name, "quota": quota}, headers=ADMIN)
    assert r.status_code == 201, r.text


def make_user(client, tenant: str, name: str, role: str = "user") -> dict[str, str]:  # type: ignore[no-untyped-def]
    r = client.post(
        f"/api/v1/tenants/{tenant}/users", json={"name": name, "role": role}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return bearer(r.json()["token"])


def alice_and_eve(client) -> tuple[dict[str, str], dict[str, str]]:  # type: ignore[no-untyped-def]
    """Two tenants, acme and other, with a user each: alice's and eve's headers."""
    make_tenant(client, "acme")
    make_tenant(client, "other")
    return make_user(client, "acme", "alice"), make_user(client, "other", "eve")


def alice_job(client) -> tuple[dict[str, str], str]:  # type: ignore[no-untyped-def]
    """Tenant acme, its user alice and a job she submitted: (alice's headers, the job's id)."""
    make_tenant(client, "acme")
    alice = make_user(client, "acme", "alice")
    return alice, submit(client, alice).json()["id"]


def spec(name: str = "job", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "model": {"file": "model.py", "class": "Net", "kwargs": {"hidden": 16}},
        "data": {"source": "synthetic", "task": "regression", "input_shape": [8], "batch_size": 4},
        "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
    }
    base.update(overrides)
    return base


def submit(client, headers, body_spec=None, files=None, **kw):  # type: ignore[no-untyped-def]
    body = {
        "spec": body_spec or spec(),
        "files": {"model.py": MODEL_PY} if files is None else files,
    }
    return client.post("/api/v1/jobs", json=body, headers=headers, **kw)
