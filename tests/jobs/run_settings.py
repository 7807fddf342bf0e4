"""``prepare_run --serve`` under test (tests/portal/test_run_worker.py): Gatehouse's settings plus the
engine's test job kind, with the files ``make run`` keeps in .local/ moved to the test's own folder
(``RUN_TEST_LOCAL_DIR``), so a test never touches the checkout's demo password."""

import os
from pathlib import Path

from tests.jobs.worker_settings import *  # noqa: F403

_local = Path(os.environ["RUN_TEST_LOCAL_DIR"])
DEMO_PASSWORD_KEPT_FILE = _local / "demo_password"
STATIC_ROOT = _local / "staticfiles"
