"""A slow server is not a down server: a request taken but not answered in time says the server
is busy (and is not sent twice); only a refused connection says "is `sam up` running?"."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.errors import SamClientError, SamConnectionError, SamTimeoutError
from client.sdk import SamClient
from tests.client.fake_sam import FakeSam

REPO = Path(__file__).resolve().parents[2]


class SilentServer:
    """Accepts connections and reads requests, never answers (a server stuck on a lock)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if conn.recv(65536):
                self.requests += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_a_silent_server_is_busy_not_down_and_gets_one_copy(silent: SilentServer) -> None:
    with SamClient(silent.url, "t", timeout_s=0.3) as client:
        with pytest.raises(SamTimeoutError) as caught:
            list(client.list_rows())
    message = str(caught.value)
    assert "is up but did not answer within 0.3 s" in message and "SAM_TIMEOUT" in message
    assert "sam up" not in message and not isinstance(caught.value, SamConnectionError)
    assert silent.requests == 1  # a GET, retryable after a dropped connection, is not resent


def test_sam_queue_against_a_silent_server_says_busy(silent: SilentServer) -> None:
    env = {"SAM_URL": silent.url, "SAM_TOKEN": "t", "SAM_TIMEOUT": "0.5", "PYTHONPATH": str(REPO)}
    env["XDG_CONFIG_HOME"] = str(REPO / "no-such-dir")
    done = subprocess.run(
        [sys.executable, "-c", "from client.entry import main; main()", "queue"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "is up but did not answer within 0.5 s" in done.stderr, done.stderr
    assert "is `sam up` running?" not in done.stderr


def test_a_refused_connection_still_says_is_sam_up_running() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with SamClient(f"http://127.0.0.1:{port}", "t", timeout_s=0.3) as client:
        client.retry_delay_s = 0.0
        with pytest.raises(SamConnectionError, match="is `sam up` running"):
            client.whoami()


def test_the_httpx_path_tells_a_timeout_from_a_refusal(fake: FakeSam) -> None:
    fake.reply_delay_s = 1.0
    client = SamClient("http://sam.test", "alice-secret", timeout_s=0.2, transport=fake.transport)
    with pytest.raises(SamTimeoutError):
        client.get_job("1")
    assert len(fake.requests) == 1


def test_sam_timeout_sets_the_wait_and_a_bad_value_is_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAM_TIMEOUT", "120")
    assert SamClient("http://sam.test")._timeout_s == 120.0
    for bad in ("soon", "0", "-5", "nan", "inf"):
        monkeypatch.setenv("SAM_TIMEOUT", bad)
        with pytest.raises(SamClientError, match="SAM_TIMEOUT"):
            SamClient("http://sam.test")
