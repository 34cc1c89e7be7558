"""dynamodb-lakehouse: DynamoDB exports and streams -> staging Iceberg change logs -> dbt merges.

The rooms, in the order the data flows through them (each ``__init__`` says what it holds):

- ``sources``   what AWS writes to S3 and how it is read: export folders and manifests, the export
                control plane, stream change files, the Lambda writer, ``s3://`` locations.
- ``dynamodb``  DynamoDB JSON -> typed columns: the table configuration, the schema file, the
                type rules, detection, value rules, decoding, column naming.
- ``lake``      the Iceberg and dbt side: Spark session, catalog, staging appends and the ledger,
                the dbt merge and its report, maintenance, expiry, rebuild, ``watch``.
- ``aws``       Glue registration, EMR packaging and submission.
- ``samples``   sample exports and stream files in AWS's exact layout (the demo, the tests).
- ``cli``       the ``ddb-lakehouse`` commands: parsers and handlers that wire the rooms.
- ``config``    at the bottom: where things are (``settings``) and what they are called
                (``names``); ``testing`` (test-only fault injection) sits beside it.

Imports run one way: cli -> aws | samples -> lake -> dynamodb -> sources -> config | testing
(an import-linter contract in ``pyproject.toml`` keeps it so). Two stable entry points stay at
this level: ``ingestion/main.py`` (``spark-submit``) and ``ingestion.stream_writer.handler``
(the deployed Lambda function).
"""
