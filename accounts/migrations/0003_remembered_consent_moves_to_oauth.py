"""``RememberedConsent`` now belongs to ``oauth`` (``oauth.0005``): leave this app's state, keep
the table and its rows."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_remembered_consent"),
        ("oauth", "0005_remembered_consent_moves_here"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="RememberedConsent")],
        ),
    ]
