"""A TCP proxy in front of the test Redis that a test can switch off and on again.

Switched off, it hangs up every connection at once (new and open ones), as a Redis that went away
would, without touching the real Redis that other tests and processes share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from urllib.parse import urlsplit

from tests.support.ratelimit_support import TEST_REDIS_URL

REDIS_ADDRESS = ("127.0.0.1", 6379)
# The proxy serves the run's own Redis database, where the tests read what went through it.
_DATABASE = urlsplit(TEST_REDIS_URL).path.lstrip("/") or "0"


class SwitchableRedis:
    def __init__(self) -> None:
        self.up = True
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._listener.getsockname()[1]}/{_DATABASE}"

    def __enter__(self) -> SwitchableRedis:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed = True
        self._listener.close()
        self.switch_off()

    def switch_off(self) -> None:
        self.up = False
        with self._lock:
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def switch_on(self) -> None:
        self.up = True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            if not self.up:
                _close(client)
                continue
            upstream = socket.create_connection(REDIS_ADDRESS)
            with self._lock:
                self._open += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
