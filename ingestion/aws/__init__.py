"""The AWS control plane beyond exports: Glue registration of the final tables, and EMR
packaging, submission and waiting.

- ``glue``: final tables registered (or moved) in the Glue catalog for Athena;
- ``packaging``: ``project.zip``, the entry point, the dependency archives, the Lambda zip;
- ``job_python``: the job's Python on EMR: the dependency archive built for its CPython and
  architecture;
- ``emr``: EMR Serverless and EMR on EC2 requests: parameters, release check, waiting;
- ``submit``: ``emr submit``: package, upload, start, wait (or a dry run);
- ``doctor``: ``doctor --aws``: the account's checks (credentials, application, tables'
  recovery and streams, last verify, Glue databases and Lake Formation);
- ``deployment``: ``deploy render``: the CloudFormation template from the table
  configuration (each table by its cadence; one watch for every stream table; a verify
  schedule per table);
- ``deployment_shared``: the template's shared part: bucket, databases, roles, stream writer;
- ``contracts``: requests checked offline against botocore's service models (the template's
  Scheduler inputs included).

May import: ``ingestion.jobs``, ``ingestion.project``, ``ingestion.upkeep``, ``ingestion.merge``,
``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``, ``ingestion.schema``, ``ingestion.dynamodb``,
``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
