"""Reading the lakehouse without a JVM: small commands (``status``, ``drift``, the "nothing new"
check of ``sync``/``merge``/``ingest``, ``query --engine duckdb``) answer in about a second
instead of paying a Spark start.

- ``catalog``: where a table's current metadata file is (the embedded catalog's SQLite file, or
  the rehearsal's) and the metadata itself: snapshots, summaries, properties, schema;
- ``duck``: a DuckDB connection with Iceberg, Avro and S3 read from their PyPI wheels (offline),
  to scan tables honouring their delete files.

Decision: on the ``local`` and ``rehearsal`` targets only, and only with the ``light`` extra
installed; elsewhere (``emr``: Glue and S3FileIO; ``hive``) these commands use Spark, as before.
Decision: the metadata file's JSON and DuckDB, not pyiceberg: importing pyiceberg's catalog and
reader alone takes 1.2 s here, twice ``ddb-lakehouse --help`` (0.6 s), while DuckDB's import and
its extensions take 0.3 s, so ``status`` stays under 2x ``--help`` (``bench/small_commands.py``).
The ledger and the merge log are read by the same functions as on the Spark path
(``ledger.entries_from``, ``merge_log.unmerged``), from other readers.

May import: ``ingestion.spark``, ``ingestion.schema``, ``ingestion.dynamodb``,
``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
