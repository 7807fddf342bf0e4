"""The settings every test runs with: pytest's own process (``DJANGO_SETTINGS_MODULE`` in
pyproject.toml) and, through the environment it passes on, every Daphne server, jobs worker and
stdio child a test starts. The product's settings with one change: a fast password hasher
(tests/support/hashers.py). tests/config/test_password_hashing.py holds the product's own
settings to a strong hasher, and the fresh-clone test runs them for real."""

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["tests.support.hashers.FastPBKDF2PasswordHasher"]
