"""The ``gatehouse-stdio`` console script: ``manage.py mcp_stdio`` for a desktop client's config.

The project's apps are not installed packages (``[tool.setuptools] packages = []``); only this
module is (``py-modules``), so it puts its own directory, the checkout, on ``sys.path`` before
Django starts. Stdout is reserved for protocol first of all, before anything is imported that could
print.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    project = str(Path(__file__).resolve().parent)
    if project not in sys.path:
        sys.path.insert(0, project)
    from core.stdio_wire import stdout_reserve

    stdout_reserve()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    arguments = sys.argv[1:] if argv is None else argv
    execute_from_command_line(["gatehouse-stdio", "mcp_stdio", *arguments])


if __name__ == "__main__":
    main()
