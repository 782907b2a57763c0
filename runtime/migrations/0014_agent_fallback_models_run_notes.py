# Model failover and run notes (docs/llm.md, "Failover"): an agent's ordered fallback models, a run's notes.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0013_console_vocabulary"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="fallback_models",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text=(
                    "Models tried in this order when a call fails before any output (connection, timeout, 429, 5xx, "
                    "overloaded), or a larger-window one on a context overflow. Enabled models, each once, not the agent's own."
                ),
            ),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="notes",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
