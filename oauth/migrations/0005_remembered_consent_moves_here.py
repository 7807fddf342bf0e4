"""``RememberedConsent`` moves here from ``accounts``: consent memory belongs to the OAuth
authorization endpoint. State only: the table keeps its name (``accounts_rememberedconsent``) and
its rows; ``accounts.0003`` drops the model from that app's state. The content type is renamed in
place, so operators' permissions on it stay granted.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _relabel(apps, *, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    # A fresh database has no row yet (post_migrate creates it under the new label).
    if not ContentType.objects.filter(app_label=target, model="rememberedconsent").exists():
        ContentType.objects.filter(app_label=source, model="rememberedconsent").update(app_label=target)


def content_type_forward(apps, schema_editor):
    _relabel(apps, source="accounts", target="oauth")


def content_type_backward(apps, schema_editor):
    _relabel(apps, source="oauth", target="accounts")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_remembered_consent"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("oauth", "0004_redirect_uri_patterns"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="RememberedConsent",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("scopes", models.CharField(help_text="Sorted, space-separated scopes the person allowed.", max_length=500)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        ("application", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.OAUTH2_PROVIDER_APPLICATION_MODEL)),
                        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.tenant")),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="remembered_consents", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "accounts_rememberedconsent",
                        "ordering": ["-updated"],
                        "constraints": [models.UniqueConstraint(fields=("user", "application", "tenant"), name="remembered_consent_unique_user_client_tenant")],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_type_forward, content_type_backward, elidable=False),
    ]
