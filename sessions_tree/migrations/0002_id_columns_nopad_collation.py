"""Id columns compare exactly on MySQL/MariaDB: binary and NO PAD (trailing spaces count).

Tables created before used ``utf8mb4_bin``, a PAD SPACE collation on MariaDB: ``"a1"``
and ``"a1 "`` were the same id. This alters those columns in place; on SQLite (and on
tables created with the new collation) there is nothing to do.
"""

from django.db import migrations


def _id_columns(apps):
    from sessions_tree.models import IdField

    for name in ("AgentSession", "SessionEntry"):
        model = apps.get_model("sessions_tree", name)
        for field in model._meta.concrete_fields:
            if isinstance(field, IdField):
                yield model, field


def forwards(apps, schema_editor):
    from sessions_tree.models import id_collation

    connection = schema_editor.connection
    collation = id_collation(connection)
    if collation is None:
        return
    quote = schema_editor.quote_name
    for model, field in _id_columns(apps):
        null = "NULL" if field.null else "NOT NULL"
        schema_editor.execute(
            f"ALTER TABLE {quote(model._meta.db_table)} MODIFY {quote(field.column)} "
            f"varchar({field.max_length}) CHARACTER SET utf8mb4 COLLATE {collation} {null}"
        )


class Migration(migrations.Migration):
    atomic = False  # DDL on MySQL/MariaDB cannot be rolled back anyway
    dependencies = [("sessions_tree", "0001_initial")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
