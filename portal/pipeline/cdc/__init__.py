"""Change data capture: the log a captured database keeps, and how a flow reads it.

The source a flow names is :class:`portal.pipeline.sources.cdc.CdcSource` (its ``source.class``);
this package is what it reads with, one module per concern — :mod:`~portal.pipeline.cdc.pg` (a
flow's PostgreSQL replication slot and publication), :mod:`~portal.pipeline.cdc.pgoutput` and
:mod:`~portal.pipeline.cdc.pgoutput_batch` (the slot's messages decoded one by one and in bulk),
:mod:`~portal.pipeline.cdc.mysql` (a MariaDB binary log), :mod:`~portal.pipeline.cdc.snapshot` (a
table's first read in key chunks while its stream keeps its position),
:mod:`~portal.pipeline.cdc.fanout` (several destinations on one log) and
:mod:`~portal.pipeline.cdc.binlog_lag` (how far a binlog flow is behind, for the monitor).

Kept light (nothing imported here): the portal's slot card and monitor read
:mod:`~portal.pipeline.cdc.pg` and :mod:`~portal.pipeline.cdc.binlog_lag` without loading Spark.
"""
