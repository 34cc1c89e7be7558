"""dynamodb-lakehouse: DynamoDB exports and streams -> staging Iceberg change logs -> dbt merges.

The rooms, top to bottom (the order in which they may import is the contract's, below):

- ``cli``        the ``ddb-lakehouse`` commands: parse, call one function below, print.
- ``aws``        Glue registration, EMR packaging and submission (beside ``samples``: sample
                 exports in AWS's exact layout, and the demo).
- ``jobs``       the flows a command runs: stage, sync, export, merge, rebuild, watch,
                 status, query; the table lock and lease (beside ``project``: add-table and the
                 dbt files of a table).
- ``maintenance`` keeping tables healthy: ``maintain`` (compaction, expiry), rebuild, drift
                 adoption, moves between entities, status, ``verify`` against an export.
- ``merge``      the dbt merge (run + scoped tests), what it tests, counts, full refresh.
- ``staging``    sources -> staging change logs: one commit per source with its ledger entry.
- ``catalog``    each table's handle, read once per merge, sync, watch and verify: its metadata
                 (through Spark, or from the files without a JVM), ledger, merge log and kept
                 types; DuckDB over the tables (``status``, ``query`` without a JVM).
- ``spark``      the Spark and Iceberg configuration, the session, jars, the embedded catalog.
- ``schema``     a table's column types: model, schema file, rules, detection, typed decode.
- ``dynamodb``   DynamoDB JSON with Spark's functions, and the table configuration.
- ``sources``    what AWS writes to S3: export folders, manifests, export control, stream files.
- ``config``     settings, names, clock and the error family (beside ``fault_points``: the
                 kill -9 points of the crash tests).

An import-linter contract in ``pyproject.toml`` keeps the order (``docs/decisions/0007``). Two
stable entry points stay at this level: ``ingestion/main.py`` (``spark-submit``) and
``ingestion.stream_writer.handler`` (the deployed Lambda function).
"""
