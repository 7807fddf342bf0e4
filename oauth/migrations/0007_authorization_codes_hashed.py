"""Authorization codes are stored as their SHA-256 from now on (oauth.token_storage): hash the
plaintext ones still waiting to be exchanged, so a sign-in in progress during the upgrade still
completes. A code lives minutes, so there are few rows. oauthlib's codes are 30 characters, so a
64-character hexadecimal value is already a checksum (written by the new code before this ran)."""

from __future__ import annotations

import hashlib
import re

from django.db import migrations

_CHECKSUM = re.compile(r"[0-9a-f]{64}")


def _hash_codes(apps, schema_editor):
    Grant = apps.get_model("oauth", "Grant")
    for grant in Grant.objects.only("pk", "code").iterator():
        if _CHECKSUM.fullmatch(grant.code):
            continue
        grant.code = hashlib.sha256(grant.code.encode("utf-8")).hexdigest()
        grant.save(update_fields=["code"])


class Migration(migrations.Migration):
    dependencies = [("oauth", "0006_used_authorization_codes")]

    # Reversed, the checksums stay: none can be turned back into its code, and codes live minutes.
    operations = [migrations.RunPython(_hash_codes, migrations.RunPython.noop)]
