"""The conformance suite's client command in CI: hands the scenario (the URL the suite appends, and
its ``MCP_CONFORMANCE_*`` environment) to ``client_zygote`` at ``GATEHOUSE_CONFORMANCE_ZYGOTE``,
prints what the management command printed and exits with its status. It imports nothing of the
project, so it starts in a few milliseconds."""

import json
import os
import socket
import sys


def main() -> int:
    request = {
        "url": sys.argv[-1],
        "env": {name: value for name, value in os.environ.items() if name.startswith("MCP_CONFORMANCE")},
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as zygote:
        zygote.connect(os.environ["GATEHOUSE_CONFORMANCE_ZYGOTE"])
        zygote.sendall(json.dumps(request).encode() + b"\n")
        answer = json.loads(zygote.makefile("rb").readline() or b'{"output": "no answer", "code": 1}')
    sys.stdout.write(answer["output"])
    return int(answer["code"])


if __name__ == "__main__":
    sys.exit(main())
