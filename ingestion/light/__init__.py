"""Reading the lakehouse without a JVM: small commands (``status``, ``drift``, the "nothing new"
check of ``sync``/``merge``/``ingest``, ``query --engine duckdb``) answer in about a second
instead of paying a Spark start.

- ``catalog``: where a table's current metadata file is (the embedded catalog's SQLite file, or
  the rehearsal's) and the metadata itself: snapshots, summaries, properties, schema;
- ``duck``: a DuckDB connection with Iceberg, Avro and S3 read from their PyPI wheels (offline),
  to scan tables honouring their delete files.

Decision: on the ``local`` and ``rehearsal`` targets only, and only with the ``light`` extra
installed; elsewhere (``emr``: Glue and S3FileIO; ``hive``) these commands use Spark, as before.

May import: ``ingestion.spark``, ``ingestion.schema``, ``ingestion.dynamodb``,
``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
