"""`sam up`'s busy-port check: a listening process holds the port, a stopped SAM does not."""

from __future__ import annotations

import socket

import pytest

from sam_worker.supervisor import PortInUse, ensure_port_free


def test_a_listening_socket_holds_the_port() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port}"):
            ensure_port_free("127.0.0.1", port)


def test_connections_left_in_time_wait_by_a_stopped_server_do_not() -> None:
    """`make demo` then `sam up` on the same port: the demo's server closed its connections
    first, which leaves them in TIME_WAIT on its port for a minute; that is no reason to refuse."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()  # the server side closes first: its end of the connection enters TIME_WAIT
    client.recv(1)
    client.close()
    server.close()
    ensure_port_free("127.0.0.1", port)
