"""The settings every test runs with: pytest's own process (``DJANGO_SETTINGS_MODULE`` in
pyproject.toml) and, through the environment it passes on, every Daphne server, jobs worker and
stdio child a test starts. The product's settings with two changes: a fast password hasher
(tests/support/hashers.py; tests/config/test_password_hashing.py holds the product's own settings
to a strong hasher, and the fresh-clone test runs them for real), and upstreams allowed to reach
loopback, where the tests run their upstream servers (``UPSTREAM_PRIVATE_NETWORKS`` in the
environment still wins; tests/upstreams/test_egress.py tests the product's empty default)."""

from config.settings import *  # noqa: F403
from config.settings import GATEHOUSE
from core.env import env_list

PASSWORD_HASHERS = ["tests.support.hashers.FastPBKDF2PasswordHasher"]

GATEHOUSE = {
    **GATEHOUSE,
    "UPSTREAM_PRIVATE_NETWORKS": env_list("UPSTREAM_PRIVATE_NETWORKS", default=["127.0.0.0/8", "::1/128"]),
}
