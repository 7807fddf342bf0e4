"""Gatehouse's settings plus the engine's test job kind: ``DJANGO_SETTINGS_MODULE`` of the worker
processes that the end-to-end engine tests start."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.jobs.engine_app"]
