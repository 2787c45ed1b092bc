"""Event now belongs to the events app (events 0001); the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0003_scale_indexes"),
        ("events", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="Event")],
        ),
    ]
