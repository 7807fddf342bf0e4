"""The product's settings, serving ``tests.server_error_urls``: for a Daphne process whose views fail."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "tests.server_error_urls"
