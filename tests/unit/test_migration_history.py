"""The empty merge migrations of parallel branches are gone: the migrations after them depend on
their parents directly. A database that applied the merges keeps their rows in
`django_migrations`; Django ignores an applied name it no longer finds, so such a database finds
its history consistent and nothing left to apply, as a new one does."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

REMOVED_MERGES = [
    ("flows", "0004_merge_0002_flow_group_owners_0003_scale_refresh"),
    ("flows", "0005_merge_20261124_2029"),
    ("orchestration", "0008_merge_0005_scale_indexes_0007_state_per_flow"),
    ("topology", "0003_merge_0002_data_node_grants_0002_scale_refresh"),
    ("topology", "0005_merge_20261124_2244"),
]


def test_each_app_has_one_line_of_migrations_without_the_merges(db):
    graph = MigrationExecutor(connection).loader.graph
    assert not set(REMOVED_MERGES) & set(graph.nodes)
    leaves = [app for app, _name in graph.leaf_nodes()]
    assert sorted(leaves) == sorted(set(leaves))  # one leaf per app: no merge is needed


def test_a_database_that_applied_the_merges_is_consistent_and_up_to_date(db):
    recorder = MigrationRecorder(connection)
    for app, name in REMOVED_MERGES:
        recorder.record_applied(app, name)
    executor = MigrationExecutor(connection)
    executor.loader.check_consistent_history(connection)
    assert set(REMOVED_MERGES) <= set(recorder.applied_migrations())
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
