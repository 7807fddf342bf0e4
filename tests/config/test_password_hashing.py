"""The product hashes passwords at full strength; only the test settings trade that for speed.

Every test runs on ``tests.settings`` (a one-iteration PBKDF2), so nothing else in the suite would
notice if the product's own settings lost their strong hasher."""

from __future__ import annotations

import importlib

from django.conf import global_settings
from django.contrib.auth.hashers import (
    Argon2PasswordHasher,
    BCryptSHA256PasswordHasher,
    PBKDF2PasswordHasher,
)
from django.utils.module_loading import import_string

# OWASP's floor for PBKDF2-HMAC-SHA256 (Password Storage Cheat Sheet, 2023).
PBKDF2_SHA256_MINIMUM_ITERATIONS = 600_000


def _product_hashers() -> list[str]:
    product = importlib.import_module("config.settings")
    return list(getattr(product, "PASSWORD_HASHERS", global_settings.PASSWORD_HASHERS))


def test_the_products_settings_hash_new_passwords_with_a_strong_hasher():
    hasher = import_string(_product_hashers()[0])()

    assert isinstance(
        hasher,
        PBKDF2PasswordHasher | Argon2PasswordHasher | BCryptSHA256PasswordHasher,
    )
    if isinstance(hasher, PBKDF2PasswordHasher):
        assert hasher.iterations >= PBKDF2_SHA256_MINIMUM_ITERATIONS
        assert hasher.encode("correct horse", hasher.salt()).startswith(f"pbkdf2_sha256${hasher.iterations}$")


def test_the_test_settings_fast_hasher_is_not_among_the_products():
    assert not any("tests." in path for path in _product_hashers())


def test_the_test_settings_still_verify_a_password_hashed_at_full_strength():
    from django.contrib.auth.hashers import check_password, make_password

    strong = make_password("correct horse", hasher=import_string(_product_hashers()[0])())

    assert check_password("correct horse", strong)
    assert not check_password("wrong horse", strong)
