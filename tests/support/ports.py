"""A free loopback port for a test server (the kernel picks it; the server binds it just after)."""

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
