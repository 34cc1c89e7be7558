{#-
  dynamodb_unique: dbt's `unique`, for the final table of a DynamoDB table at the cost of the
  merge rather than of the table; any other model gets dbt's own SQL. Its own name, not an
  override of dbt's `unique`: a YAML that says `unique` runs dbt's test, and `ddb-lakehouse
  merge` refuses such a final table's YAML with one line naming this test
  (ingestion/merge/model_tests.py).

  Scoped like the change-log tests (macros/test_scope.sql): after `ddb-lakehouse merge`, only
  the rows of the keys its batches touched are grouped. Sound by the same induction: a merge
  writes rows only for keys its batches hold (merge-on-read leaves every other row where it was),
  so a duplicate it could make has a touched key; the table before it was checked, whole after a
  first build, a full export, a full refresh, `merge --full-check` and `maintain`. Iceberg's
  metadata cannot answer it (the key bounds of data files overlap), hence the scope.
-#}
{% test dynamodb_unique(model, column_name) -%}
  {%- set table = _dynamodb_final_table(model) -%}
  {%- if table is none -%}
{{ dbt.default__test_unique(model, column_name) }}
  {%- else %}
select {{ column_name }} as unique_field, count(*) as n_records
from {{ dynamodb_tested(table, model, column_name) }}
where {{ column_name }} is not null
group by {{ column_name }}
having count(*) > 1
  {%- endif -%}
{%- endtest %}
