"""What the catalog holds of each table, read once per job: its handle (``table``), its Iceberg
metadata through Spark or from the files without a JVM (``table_metadata``), the ledger, the
merge log, the kept column types, and DuckDB over the data for the commands that start no JVM
(``status``, ``drift``, a ``sync``/``merge``/``ingest`` with nothing new, ``query``)."""
