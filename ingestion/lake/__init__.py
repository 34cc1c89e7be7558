"""The Iceberg and dbt side: everything that writes or reads the lakehouse's tables.

- ``spark_config``, ``spark_submit``, ``jars``, ``catalog``: the Spark session and the embedded
  catalog, from ``profiles/profiles.yml`` (``jars`` also installs the opt-in S3A jars);
- ``ledger``, ``chain``, ``staging``, ``drift``: one staging commit per source, with its ledger
  entry; the chain of exports (gaps, fillings, overlaps);
- ``ingest`` (exports), ``streams`` + ``stream_rejects`` (change files): sources -> staging;
- ``merge``, ``merge_log``, ``merge_counts``: ``dbt run`` + ``dbt test`` and what they changed;
- ``maintenance``, ``expiry``, ``rebuild``, ``adopt``, ``status``, ``watch``, ``table_lock``:
  keeping tables healthy (drift adopted, one writer of a kind per table);
- ``onboarding``, ``scaffold`` (+ ``templates/``): a new table's configuration and dbt files.

May import: ``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``,
``ingestion.testing``.
"""
