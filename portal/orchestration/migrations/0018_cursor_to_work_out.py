"""The cursors to work out (next_tick NULL), read by every scheduler pass, by an index of their own
(orchestration.control.scheduler.schedule_due_ticks)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("orchestration", "0017_lineage_edges"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="schedulecursor",
            index=models.Index(
                condition=models.Q(("next_tick__isnull", True)), fields=["flow"], name="cursor_to_work_out"
            ),
        ),
    ]
