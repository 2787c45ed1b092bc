from django.db import migrations, models
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce


def fill_last_runs(apps, schema_editor):
    """Each flow's newest execution, in one statement (an index look-up per flow)."""
    FlowConfig = apps.get_model("flows", "FlowConfig")
    FlowExecution = apps.get_model("orchestration", "FlowExecution")
    newest = FlowExecution.objects.filter(flow=OuterRef("pk")).order_by("-execution_id")
    FlowConfig.objects.update(
        last_run_id=Subquery(newest.values("execution_id")[:1]),
        last_run_status=Coalesce(Subquery(newest.values("status")[:1]), Value("")),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("flows", "0011_flow_last_run"),
        ("orchestration", "0012_schema_history"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="flowexecution",
            index=models.Index(fields=["flow", "-execution_id"], name="execution_flow_newest"),
        ),
        migrations.RunPython(fill_last_runs, migrations.RunPython.noop, elidable=True),
    ]
