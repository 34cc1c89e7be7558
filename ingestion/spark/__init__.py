"""The Spark side of every job: one Spark and Iceberg configuration per target, the session
built from it, the jars it needs, the embedded catalog, and progress for long work.

- ``spark_config``: the configuration of the target (``profiles.yml``) and
  ``build_spark``: the one session of a process;
- ``spark_submit``: a command run as a ``spark-submit`` job with that same configuration;
- ``jars``: the jars a session loads (Iceberg runtime, SQLite JDBC) and the opt-in S3A jars
  (``python -m ingestion.spark.jars install-aws``);
- ``catalog``: the embedded Iceberg JDBC catalog on SQLite and its namespaces;
- ``table_metadata``: a table's Iceberg metadata (snapshots, properties) read from the
  session's catalog without a Spark job;
- ``progress``: a line every few seconds on long Spark work: tasks done, time left.

May import: ``ingestion.schema``, ``ingestion.dynamodb``, ``ingestion.sources``,
``ingestion.config``, ``ingestion.fault_points``.
"""
