"""``AuditEvent`` and ``RateLimitRule`` now belong to ``core`` (``core.0001``): leave this app's
state, keep the tables and their rows."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
        ("mcp_gateway", "0008_audit_client_deleted"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="AuditEvent"),
                migrations.DeleteModel(name="RateLimitRule"),
            ],
        ),
    ]
