{#-
  dbt's own `unique` and `not_null`, for the final table of a DynamoDB table, at the cost of the
  merge rather than of the table (adapter.dispatch finds a root project's macro before dbt's).
  Any other model gets dbt's own SQL.

  unique: scoped like the change-log tests (final_matches_staging.sql): after `ddb-lakehouse
  merge`, only the rows of the keys its batches touched are grouped. Sound by the same induction:
  a merge writes rows only for keys its batches hold (merge-on-read leaves every other row where
  it was), so a duplicate it could make has a touched key; the table before it was checked, whole
  after a first build, a full export, a full refresh, `merge --full-check` and `maintain`.
  Iceberg's metadata cannot answer it (the key bounds of data files overlap), hence the scope.

  not_null: answered by Iceberg's metadata when it can: every live data file (manifest entries,
  `<table>.files`) records the column's null count and they add up to 0. Rows deleted by a
  position or equality delete only remove values, so 0 is a proof. The test's SQL is then that
  metadata query (one row per data file with a null; none), no data file is opened. When a file
  lacks the metric (Iceberg keeps metrics for the first 100 columns by default) or counts a null
  (a deleted row may be the one), the column is scanned whole, as dbt does.
-#}

{#- The DynamoDB table whose final table `model` is, or none. -#}
{% macro dynamodb_final_table(model) -%}
  {%- set table = model.identifier -%}
  {%- if table in var('dynamodb_tables', {}) and model.schema != var('lakehouse_staging_schema') -%}
    {{ return(table) }}
  {%- endif -%}
  {{ return(none) }}
{%- endmacro %}

{% macro default__test_unique(model, column_name) -%}
  {%- set table = dynamodb_final_table(model) -%}
  {%- if table is none -%}
{{ dbt.default__test_unique(model, column_name) }}
  {%- else %}
select {{ column_name }} as unique_field, count(*) as n_records
from {{ dynamodb_tested(table, model, column_name) }}
where {{ column_name }} is not null
group by {{ column_name }}
having count(*) > 1
  {%- endif -%}
{%- endmacro %}

{#- True when Iceberg's metadata proves `column_name` of `model` holds no null. -#}
{% macro dynamodb_metadata_has_no_null(model, column_name) -%}
  {%- if not execute -%}{{ return(false) }}{%- endif -%}
  {%- set metric = 'readable_metrics.' ~ lakehouse_quote(column_name) ~ '.null_value_count' -%}
  {%- set query -%}
    select count(*), count({{ metric }}), coalesce(sum({{ metric }}), 0)
    from {{ model }}.files where content = 0
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {{ return(row[0] == row[1] and row[2] == 0) }}
{%- endmacro %}

{% macro default__test_not_null(model, column_name) -%}
  {%- set table = dynamodb_final_table(model) -%}
  {%- if table is not none and dynamodb_metadata_has_no_null(model, column_name) %}
select file_path, readable_metrics.{{ lakehouse_quote(column_name) }}.null_value_count as nulls
from {{ model }}.files
where content = 0 and readable_metrics.{{ lakehouse_quote(column_name) }}.null_value_count != 0
  {%- else -%}
{{ dbt.default__test_not_null(model, column_name) }}
  {%- endif -%}
{%- endmacro %}
