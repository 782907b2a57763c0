# OpenAI-compatible endpoints (docs/api.md): a run's instructions and sampling parameters, and the
# conversation nodes Chat Completions clients are matched against.

import django.db.models.deletion
import sessions_tree.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0015_model_key_permission'),
        ('sessions_tree', '0005_console_vocabulary'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentrun',
            name='instructions',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='agentrun',
            name='sampling',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.CreateModel(
            name='ConversationNode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('owner_id', models.BigIntegerField(help_text="The session's user (sessions keep their owner).", null=True)),
                ('entry_id', sessions_tree.models.IdField(max_length=64)),
                ('depth', models.PositiveIntegerField(help_text='Messages from the root to this one, this one included.')),
                ('digest', models.CharField(help_text='Hex of the first 16 bytes of the chained SHA-256.', max_length=32)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sessions_tree.agentsession')),
            ],
            options={
                'indexes': [models.Index(fields=['owner_id', 'digest'], name='conversation_node_lookup')],
                'constraints': [models.UniqueConstraint(fields=('session', 'entry_id'), name='conversation_node_entry')],
            },
        ),
    ]
