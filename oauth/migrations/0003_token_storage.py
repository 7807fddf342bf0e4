"""Tokens at rest become their SHA-256 checksums only (oauth.token_storage).

Tokens issued before this migration stay valid: every lookup already goes through
``token_checksum``, which DOT has always filled, so blanking the plaintext column changes nothing
for a client. A row without a checksum (none is expected) gets one first. Refresh tokens from
before token families get a family of their own, so that reuse detection and revocation can end
them like any other. There is no way back: the reverse migration leaves the columns blank.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db import migrations


def _checksum(raw_token: str) -> str:
    # Frozen here rather than imported, as migrations must keep working when the code moves on.
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def tokens_hash_at_rest(apps: Any, schema_editor: Any) -> None:
    for name in ("AccessToken", "RefreshToken"):
        model = apps.get_model("oauth", name)
        for pk, token in model.objects.filter(token_checksum="").exclude(token="").values_list("pk", "token"):
            model.objects.filter(pk=pk).update(token_checksum=_checksum(token))
        model.objects.exclude(token="").update(token="")
    refresh_token = apps.get_model("oauth", "RefreshToken")
    for pk in refresh_token.objects.filter(token_family__isnull=True).values_list("pk", flat=True):
        refresh_token.objects.filter(pk=pk).update(token_family=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [
        ("oauth", "0002_application_links"),
    ]

    operations = [
        migrations.RunPython(tokens_hash_at_rest, migrations.RunPython.noop, elidable=True),
    ]
