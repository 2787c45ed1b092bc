"""Room on each page of the flow table for a new version of its rows (fillfactor 50).

A topology change recompiles thousands of flows and rewrites each one's verdict
(`compilation_message` names the executors); with full pages every such UPDATE
wrote a new index entry into all nine indexes of the table, four of them trigram
GIN indexes, while with room on the page it is a heap-only (HOT) update touching
none: 10,000 verdicts took 2.2–3.6 s and now 0.17–0.44 s on this machine. A
batch may update every row of a page in one transaction, so the page keeps room
for all of them. The flow table is small (about 300 bytes a row), so doubling
its heap costs little. PostgreSQL only; the existing rows are rewritten into
the new fill once, here (VACUUM cannot run inside a transaction)."""

from django.db import migrations


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE flows_flowconfig SET (fillfactor = 50)")
    schema_editor.execute("VACUUM FULL flows_flowconfig")


def fill_again(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE flows_flowconfig RESET (fillfactor)")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("flows", "0014_freshness_per_dataset")]

    operations = [migrations.RunPython(leave_room, fill_again, elidable=False)]
