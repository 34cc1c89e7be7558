"""Reading the lakehouse without a JVM: the Iceberg metadata from the embedded catalog's SQLite
file, and DuckDB over the data, so that ``status``, ``drift``, a ``sync``/``merge``/``ingest``
with nothing new and ``query --engine duckdb`` answer without starting Java (local and rehearsal
targets, with the ``light`` extra; why DuckDB and not pyiceberg: docs/performance.md)."""
