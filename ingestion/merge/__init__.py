"""Staging change logs -> final tables: ``dbt run`` + ``dbt test`` of the tables' models
(``merge_with_delete``), and what each merge changed.

- ``runner``: dbt invoked in the process's own Spark session: run, test (scoped to the touched
  keys), full check;
- ``merge_log``: the batches each merge applied (``staging.dynamodb_lakehouse_merges``);
- ``merge_counts``: rows inserted, updated and deleted per final table, from the merge's commits;
- ``full_refresh``: the full-refresh decision: a final table whose column types differ from its
  schema's;
- ``model_tests``: a final table's YAML runs the merge's scoped key tests, not dbt's whole-table
  ones.

May import: ``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``, ``ingestion.schema``,
``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
