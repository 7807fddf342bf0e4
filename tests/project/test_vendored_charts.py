"""The console's chart library is vendored, not fetched: the file `make vendor-charts` copies from
npm is committed with its licence, at the version the Makefile names."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
VENDORED = BASE_DIR / "portal" / "static" / "vendor" / "chartjs"


def test_the_vendored_chart_js_is_version_4_6_1():
    header = (VENDORED / "chart.umd.min.js").read_text()[:200]
    assert re.findall(r"^ \* Chart\.js v(\S+)$", header, re.MULTILINE) == ["4.6.1"]


def test_the_makefile_refreshes_the_same_version():
    makefile = (BASE_DIR / "Makefile").read_text()
    assert re.findall(r"^CHARTJS_VERSION \?= (\S+)$", makefile, re.MULTILINE) == ["4.6.1"]


def test_its_licence_is_vendored_beside_it():
    assert "MIT License" in (VENDORED / "LICENSE.md").read_text()
