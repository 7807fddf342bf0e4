# The budgets and usage records become every model call's (issue 37): the tables stay as they
# are here (state only); 0003 renames them.

import django.core.validators
import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('language_models', '0001_initial'),
        ('llm_gateway', '0001_initial'),
        ('accounts', '0003_remembered_consent_moves_to_oauth'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='LlmBudget',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('period', models.CharField(choices=[('day', 'Per day (UTC)'), ('month', 'Per month (UTC)')], default='day', max_length=10)),
                        ('max_tokens', models.PositiveBigIntegerField(blank=True, help_text='Prompt and completion tokens.', null=True, validators=[django.core.validators.MinValueValidator(0)])),
                        ('max_cost', models.DecimalField(blank=True, decimal_places=4, help_text='US dollars, as litellm prices each call.', max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)])),
                        ('note', models.CharField(blank=True, max_length=200)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('updated', models.DateTimeField(auto_now=True)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='llm_budgets', to='accounts.tenant')),
                        ('user', models.ForeignKey(blank=True, help_text='Only this person (or service client). Empty: the whole tenant together.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='llm_budgets', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'llm_gateway_llmbudget',
                        'verbose_name': 'LLM budget',
                        'ordering': ['tenant__slug', 'period', 'user__username'],
                        'constraints': [models.UniqueConstraint(condition=models.Q(('user__isnull', True)), fields=('tenant', 'period'), name='llm_budget_one_per_tenant_period', violation_error_message='This tenant already has a budget for this period.'), models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('tenant', 'user', 'period'), name='llm_budget_one_per_person_period', violation_error_message='This person already has a budget for this period.'), models.CheckConstraint(condition=models.Q(('max_tokens__isnull', False), ('max_cost__isnull', False), _connector='OR'), name='llm_budget_has_a_limit', violation_error_message='Set a token limit, a cost limit, or both.'), models.CheckConstraint(condition=models.Q(('max_cost__isnull', True), ('max_cost__gte', 0), _connector='OR'), name='llm_budget_cost_not_negative')],
                    },
                ),
                migrations.CreateModel(
                    name='LlmUsage',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('created', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('channel', models.CharField(help_text='api (REST) or mcp (the llm_invoke tool).', max_length=10)),
                        ('provider', models.CharField(max_length=50)),
                        ('model', models.CharField(max_length=200)),
                        ('key_source', models.CharField(blank=True, help_text='stored, header or environment.', max_length=20)),
                        ('prompt_tokens', models.PositiveIntegerField(default=0)),
                        ('completion_tokens', models.PositiveIntegerField(default=0)),
                        ('total_tokens', models.PositiveIntegerField(default=0)),
                        ('cost', models.DecimalField(blank=True, decimal_places=8, max_digits=14, null=True)),
                        ('duration_ms', models.PositiveIntegerField(default=0)),
                        ('outcome', models.CharField(choices=[('ok', 'Answered'), ('error', 'Failed'), ('refused', 'Refused (budget, input)')], max_length=10)),
                        ('error_code', models.CharField(blank=True, help_text="The API's error code, if any.", max_length=50)),
                        ('structured', models.BooleanField(default=False, help_text='A response schema was asked for.')),
                        ('request_id', models.CharField(blank=True, max_length=128)),
                        ('application', models.ForeignKey(blank=True, help_text='The OAuth client that called.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.OAUTH2_PROVIDER_APPLICATION_MODEL)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.tenant')),
                        ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'llm_gateway_llmusage',
                        'verbose_name': 'LLM usage record',
                        'ordering': ['-created'],
                        'indexes': [models.Index(fields=['tenant', 'created'], name='llm_usage_tenant_created'), models.Index(fields=['tenant', 'user', 'created'], name='llm_usage_person_created')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
