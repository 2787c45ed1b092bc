"""A flow's compile verdict is stored once, on the flow (`compilation_status`,
`compilation_message`, which the flow list, its filters and the recompile
select by without a join): CompiledJobDag loses its `status` column and its
stored DAG the `status`/`message` keys. Reversible: going back copies the
flow's verdict into both again."""

from typing import Any

from django.db import migrations, models

VERDICT = ("status", "message")
BATCH = 1000


def _batches(CompiledJobDag: Any) -> Any:
    rows = CompiledJobDag.objects.select_related("flow").order_by("pk")
    last = 0
    while batch := list(rows.filter(pk__gt=last)[:BATCH]):
        yield batch
        last = batch[-1].pk


def drop_verdict_from_dags(apps: Any, schema_editor: Any) -> None:
    CompiledJobDag = apps.get_model("flows", "CompiledJobDag")
    for batch in _batches(CompiledJobDag):
        changed = []
        for row in batch:
            if isinstance(row.dag, dict) and any(key in row.dag for key in VERDICT):
                row.dag = {key: value for key, value in row.dag.items() if key not in VERDICT}
                changed.append(row)
        CompiledJobDag.objects.bulk_update(changed, ["dag"])


def restore_verdict_in_dags(apps: Any, schema_editor: Any) -> None:
    CompiledJobDag = apps.get_model("flows", "CompiledJobDag")
    for batch in _batches(CompiledJobDag):
        for row in batch:
            status, message = row.flow.compilation_status, row.flow.compilation_message
            row.status = status
            if isinstance(row.dag, dict):
                row.dag = {**row.dag, "status": status, "message": message}
        CompiledJobDag.objects.bulk_update(batch, ["status", "dag"])


class Migration(migrations.Migration):
    dependencies = [
        ("flows", "0007_flow_search_trigram"),
    ]

    operations = [
        migrations.RunPython(drop_verdict_from_dags, restore_verdict_in_dags, elidable=True),
        # A default only so that going back can add the column to existing rows.
        migrations.AlterField(
            model_name="compiledjobdag", name="status", field=models.CharField(default="", max_length=16)
        ),
        migrations.RemoveField(model_name="compiledjobdag", name="status"),
    ]
