{#-
  dynamodb_not_null: dbt's `not_null` (its own SQL, `where <column> is null`), kept under its own
  name for the final tables' YAML (ingestion/merge/model_tests.py). On an Iceberg table that SQL
  reads no data file when the metadata proves the column has no null: Iceberg plans the scan
  with each live data file's null count (manifest metrics) and skips every file whose count is 0.
  Rows deleted by a position or equality delete only remove values, so a count of 0 is a proof.
  A file whose count is above 0 (a deleted row may be the one) or that lacks the metric (Iceberg
  keeps metrics for the first 100 columns by default) is read. One query, where a query of
  `<table>.files` and then the test's own took two (4 tests a merge: bench/apply_cost.py,
  docs/performance.md).
-#}
{% test dynamodb_not_null(model, column_name) -%}
{{ dbt.default__test_not_null(model, column_name) }}
{%- endtest %}
