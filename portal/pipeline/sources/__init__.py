"""Sources: turn a JobSpec into WorkUnits, and a WorkUnit into a bounded DataFrame.

Built-ins: :class:`portal.pipeline.sources.files.FileSource` and
:class:`portal.pipeline.sources.jdbc.JdbcSource`; any :class:`~portal.pipeline.sources.base.Source`
subclass can be named in ``source.class``.
"""
