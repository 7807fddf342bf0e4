from django.db import migrations


class Migration(migrations.Migration):
    """Reserved for the token-storage work of issue 5 (hashed tokens at rest); later oauth
    migrations depend on it so that parallel work does not fork the migration graph."""

    dependencies = [
        ("oauth", "0002_application_links"),
    ]

    operations: list = []
