"""The password hasher of the test settings (``tests.settings``).

Django's own PBKDF2 at one iteration: every test that makes a person (factories, the demo, DOT
hashing a client secret) or signs one in would otherwise spend about 0.3 s a hash at production
strength, which was half of the in-process tier's time. The algorithm's name is unchanged, so a
stored hash reads as the product's own (``pbkdf2_sha256$…``); the iterations travel in the hash, so a
hash made at full strength (a fresh clone's ``make run``) still verifies, and is re-hashed cheaply
on its first sign-in."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
