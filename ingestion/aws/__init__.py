"""The AWS control plane beyond exports: Glue registration of the final tables (``glue``), and
EMR packaging, submission and waiting (``emr``). The S3A jars for ``s3://`` outside EMR are an
opt-in install: ``python -m ingestion.spark.jars install-aws``.

May import: ``ingestion.lake`` and every room below it.
"""
