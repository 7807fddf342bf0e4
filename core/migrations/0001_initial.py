"""``AuditEvent`` and ``RateLimitRule`` move here from ``mcp_gateway``, their tables untouched.

State only: the tables keep their names (``db_table``) and every row, so a database created on an
earlier release migrates with no data change. The tables themselves were created by
``mcp_gateway.0006``, which is why this first migration depends on that app's last one (a
dependency of the migration graph, not a Python import). ``mcp_gateway.0009`` then drops the two
models from that app's state. The content types are renamed in place, so operators' permissions on
these models stay granted.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MOVED = ("auditevent", "ratelimitrule")


def _relabel(apps, *, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        # A fresh database has no rows yet (post_migrate creates them under the new label).
        if not ContentType.objects.filter(app_label=target, model=model).exists():
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def content_types_forward(apps, schema_editor):
    _relabel(apps, source="mcp_gateway", target="core")


def content_types_backward(apps, schema_editor):
    _relabel(apps, source="core", target="mcp_gateway")


AUDIT_ACTIONS = [
    ("session.created", "MCP session created"),
    ("session.terminated", "MCP session terminated"),
    ("resource.read", "Resource read"),
    ("tool.called", "Tool called"),
    ("permission.denied", "Permission denied"),
    ("rate.limited", "Rate limited"),
    ("login.succeeded", "Login succeeded"),
    ("login.failed", "Login failed"),
    ("consent.granted", "Consent granted"),
    ("consent.denied", "Consent denied"),
    ("client.registered", "OAuth client registered"),
    ("client.deleted", "OAuth client deleted"),
    ("token.issued", "Token issued"),
    ("token.refreshed", "Token refreshed"),
    ("token.revoked", "Token revoked"),
]


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("accounts", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("mcp_gateway", "0008_audit_client_deleted"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ("action", models.CharField(choices=AUDIT_ACTIONS, max_length=40)),
                        ("outcome", models.CharField(choices=[("ok", "Succeeded"), ("error", "Failed"), ("denied", "Refused")], default="ok", max_length=10)),
                        ("username", models.CharField(blank=True, max_length=150)),
                        ("client_id", models.CharField(blank=True, max_length=255)),
                        ("session_id", models.CharField(blank=True, max_length=64)),
                        ("request_id", models.CharField(blank=True, max_length=128)),
                        ("ip", models.GenericIPAddressField(blank=True, null=True)),
                        ("target", models.CharField(blank=True, help_text="The tool, resource or client acted on.", max_length=500)),
                        ("duration_ms", models.FloatField(blank=True, null=True)),
                        ("detail", models.JSONField(blank=True, default=dict)),
                        ("application", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.OAUTH2_PROVIDER_APPLICATION_MODEL)),
                        ("tenant", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="accounts.tenant")),
                        ("user", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "mcp_gateway_auditevent",
                        "ordering": ["-created", "-id"],
                        "indexes": [
                            models.Index(fields=["tenant", "created"], name="audit_tenant_created"),
                            models.Index(fields=["user", "created"], name="audit_user_created"),
                            models.Index(fields=["action", "created"], name="audit_action_created"),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="RateLimitRule",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("scope", models.CharField(choices=[("tool", "Tool calls (per user and tool)"), ("resource", "Resource reads (per user)"), ("authorize", "Authorization endpoint (per IP)"), ("login", "Login attempts (per IP and username)"), ("register", "Client registration (per IP)")], max_length=20)),
                        ("target", models.CharField(blank=True, help_text="A tool name, or a resource URI prefix; blank applies to every tool or resource.", max_length=200)),
                        ("limit", models.PositiveIntegerField(help_text="Requests allowed per period; 0 refuses every request.")),
                        ("period_seconds", models.PositiveIntegerField(default=60)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        ("tenant", models.ForeignKey(blank=True, help_text="Blank applies to every tenant. Ignored for the per-IP scopes.", null=True, on_delete=django.db.models.deletion.CASCADE, related_name="rate_limit_rules", to="accounts.tenant")),
                    ],
                    options={
                        "db_table": "mcp_gateway_ratelimitrule",
                        "ordering": ["scope", "target"],
                        "constraints": [models.UniqueConstraint(fields=("scope", "target", "tenant"), name="rate_limit_rule_unique", nulls_distinct=False)],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_forward, content_types_backward, elidable=False),
    ]
