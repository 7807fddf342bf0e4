"""The product's settings, serving ``tests.support.server_error_urls``: for a Daphne whose views fail."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.support.server_error_urls"
