# The budgets and usage records move to language_models (its 0002 takes them over, state only).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('llm_gateway', '0001_initial'),
        ('language_models', '0002_budgets_and_usage_from_llm_gateway'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='LlmBudget'),
                migrations.DeleteModel(name='LlmUsage'),
            ],
            database_operations=[],
        ),
    ]
