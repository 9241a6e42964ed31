"""/docs and /redoc work with no internet access, and "Try it out" can send a SAM token."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.api.helpers import make_tenant, make_user
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def docs_client(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The real app on SQLite (the pages do not touch the database)."""
    from fastapi.testclient import TestClient

    from sam_server.app import create_app
    from sam_server.config import Settings

    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN)
    with TestClient(create_app(settings)) as client:
        yield client


class _Refs(HTMLParser):
    """Every URL a page makes the browser load: src= and href= of tags, and spec-url=."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "spec-url") and value:
                self.urls.append(value)


def _page_refs(client, path: str) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    page = client.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    refs = _Refs()
    refs.feed(page.text)
    return page.text, refs.urls


@pytest.mark.parametrize(
    ("path", "must_load"),
    [
        ("/docs", {"swagger-ui-bundle.js": "javascript", "swagger-ui.css": "text/css"}),
        ("/redoc", {"redoc.standalone.js": "javascript"}),
    ],
)
def test_docs_pages_load_only_same_origin_assets_that_exist(docs_client, path, must_load) -> None:  # type: ignore[no-untyped-def]
    text, urls = _page_refs(docs_client, path)
    assert urls, f"{path} references nothing"
    for url in urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{path} loads {url} from another host"
        asset = docs_client.get(url)
        assert asset.status_code == 200, (
            f"{path} references {url}, which answers {asset.status_code}"
        )
    for name, kind in must_load.items():
        url = next((u for u in urls if u.endswith("/" + name)), None)
        assert url is not None, f"{path} does not load {name}"
        asset = docs_client.get(url)
        assert kind in asset.headers["content-type"]
        assert len(asset.content) > 10_000, f"{name} is not the real bundle"
    # Nothing else on the page names another host either (Swagger UI's online validator,
    # Google fonts, a CDN in an inline script).
    for host in ("cdn.jsdelivr.net", "unpkg.com", "googleapis.com", "validator.swagger.io"):
        assert host not in text
    if path == "/docs":
        assert '"validatorUrl": null' in text


def test_the_docs_page_reads_this_servers_openapi_document(docs_client) -> None:  # type: ignore[no-untyped-def]
    text, urls = _page_refs(docs_client, "/redoc")
    assert "/openapi.json" in urls
    assert "url: '/openapi.json'" in docs_client.get("/docs").text
    assert docs_client.get("/openapi.json").json()["info"]["title"] == "SAM"


def test_openapi_declares_the_bearer_scheme_on_every_protected_route(docs_client) -> None:  # type: ignore[no-untyped-def]
    document = docs_client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert len(schemes) == 1
    ((name, scheme),) = schemes.items()
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    protected = unprotected = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/api/"):
                assert operation.get("security") == [{name: []}], f"{method} {path}"
                protected += 1
            else:  # docs/contract.md: /healthz, /readyz and /metrics need no token
                assert "security" not in operation, f"{method} {path}"
                unprotected += 1
    assert protected >= 20 and unprotected == 3
    # The raw Authorization header is not also listed as a parameter (the scheme sends it).
    for operations in document["paths"].values():
        for operation in operations.values():
            names = {p["name"].lower() for p in operation.get("parameters", [])}
            assert "authorization" not in names


def test_a_call_made_as_the_docs_page_makes_it_is_authorized(docs_client) -> None:  # type: ignore[no-untyped-def]
    """What "Authorize" + "Try it out" sends, built from the document's own scheme."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    make_tenant(docs_client, "physics")
    token = make_user(docs_client, "physics", "alice")["Authorization"].split()[1]
    document = docs_client.get("/openapi.json").json()
    (scheme,) = document["components"]["securitySchemes"].values()
    operation = document["paths"]["/api/v1/whoami"]["get"]
    assert operation["security"]
    header = {"Authorization": f"{scheme['scheme'].capitalize()} {token}"}

    answer = docs_client.get("/api/v1/whoami", headers=header)
    assert answer.status_code == 200
    assert answer.json()["name"] == "alice" and answer.json()["tenant"] == "physics"
    # Without "Authorize", the same call is refused with the contract's problem+json 401.
    refused = docs_client.get("/api/v1/whoami")
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("application/problem+json")
    # A submit (its token is read outside FastAPI's dependencies) is documented the same way.
    assert document["paths"]["/api/v1/jobs"]["post"]["security"] == operation["security"]
    assert docs_client.get("/api/v1/whoami", headers=admin).status_code == 200
