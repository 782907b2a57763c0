from django.db import migrations, models


def every_agent_on_purpose(apps, schema_editor):
    """An empty agent list meant "every agent" and now means "no agent": the servers saved with
    one keep reaching every agent, now written as ["*"] so the console shows it."""
    McpServer = apps.get_model("toolcatalog", "McpServer")
    for server in McpServer.objects.all().only("pk", "agents"):
        if not server.agents:
            McpServer.objects.filter(pk=server.pk).update(agents=["*"])


def back_to_empty(apps, schema_editor):
    McpServer = apps.get_model("toolcatalog", "McpServer")
    for server in McpServer.objects.all().only("pk", "agents"):
        if server.agents == ["*"]:
            McpServer.objects.filter(pk=server.pk).update(agents=[])


class Migration(migrations.Migration):
    dependencies = [
        ("toolcatalog", "0003_mcp_server"),
    ]

    operations = [
        migrations.AlterField(
            model_name="mcpserver",
            name="agents",
            field=models.JSONField(
                blank=True, default=list, help_text='Agent names that may use its tools, or ["*"] for every agent; empty: no agent.'
            ),
        ),
        migrations.RunPython(every_agent_on_purpose, back_to_empty),
    ]
