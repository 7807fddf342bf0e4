"""One Django process that runs ``manage.py upstream_conformance_client`` for each of the suite's
client scenarios without starting Django each time.

The suite starts its client command once per scenario, and a ``manage.py`` process spends seconds
of CPU importing the project before it does anything: across the client scenarios that is minutes
of CI. So the test gives the suite ``client_relay.py`` as its command, a script that imports nothing
of the project, and starts this process once: it sets Django up, then for each relayed scenario
forks a child, which runs the real management command with the scenario's URL and environment and
answers its output and exit status. A child per scenario keeps what one run leaves in a process
(pooled sessions, OAuth state, the headless browser) from the next, as separate commands would.

    python -m tests.e2e.conformance.client_zygote SOCKET_PATH
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import traceback


def _serve(listener: socket.socket) -> None:
    from django.core.management import CommandError, call_command
    from django.db import connections

    # Children are reaped by the kernel: nobody waits for them here.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        connection, _ = listener.accept()
        request = json.loads(connection.makefile("rb").readline())
        # No connection may cross the fork: each child opens its own.
        connections.close_all()
        if os.fork() != 0:
            connection.close()
            continue
        listener.close()
        output = io.StringIO()
        code = 0
        try:
            os.environ.update({str(k): str(v) for k, v in request["env"].items()})
            call_command("upstream_conformance_client", request["url"], stdout=output, stderr=output)
        except CommandError as error:
            output.write(f"CommandError: {error}\n")
            code = 1
        except BaseException:
            output.write(traceback.format_exc())
            code = 1
        try:
            connection.sendall(json.dumps({"output": output.getvalue(), "code": code}).encode() + b"\n")
        finally:
            os._exit(code)


def main() -> None:
    import django

    path = sys.argv[1]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")  # as manage.py does
    django.setup()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(16)
    # Ready only once it listens: the test waits for the path.
    os.rename(path + ".tmp", path)
    _serve(listener)


if __name__ == "__main__":
    main()
