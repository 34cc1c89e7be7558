"""What the catalog holds of each table, read once per job: its handle (``table``), its Iceberg
metadata read through Spark or from the files without a JVM (``table_metadata``), the ledger of
applied sources (``ledger``), the merge log (``merge_log``), the kept column types
(``table_types``, ``entity_types``) and the types a batch is staged with (``schema_choice``), and
DuckDB over the data for the commands that start no JVM (``duckdb_engine``: ``status``,
``drift``, a ``sync``/``merge``/``ingest`` with nothing new and ``query --engine duckdb``, on the
local and rehearsal targets with the ``light`` extra; why DuckDB and not pyiceberg:
docs/performance.md)."""
