"""Destinations: a branch's records staged by a DataWriter, then published exactly once by CommitSteps.

One module per kind — :mod:`~portal.pipeline.destinations.files` (Parquet, ORC, JSON, CSV, Avro),
:mod:`~portal.pipeline.destinations.jdbc` (PostgreSQL, MySQL/MariaDB, SQLite tables) and
:mod:`~portal.pipeline.destinations.iceberg` — on the contract of
:mod:`~portal.pipeline.destinations.base`. :mod:`~portal.pipeline.destinations.builder` picks a
branch's writer, :mod:`~portal.pipeline.destinations.commit_steps` knows every step type a stored
step may name, and :mod:`~portal.pipeline.destinations.commitplan` plans a job's commit.

Kept light (nothing imported here): the web process reads :mod:`~portal.pipeline.destinations.write_modes`
and :mod:`~portal.pipeline.destinations.table_templates` without loading Spark.
"""
