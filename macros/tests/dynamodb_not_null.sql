{#-
  dynamodb_not_null: dbt's `not_null`, answered by Iceberg's metadata when it can, on the final
  table of a DynamoDB table; any other model gets dbt's own SQL. Every live data file (manifest
  entries, `<table>.files`) records the column's null count, and when they add up to 0 that is a
  proof: rows deleted by a position or equality delete only remove values. The test's SQL is then
  that metadata query (one row per data file with a null; none), and no data file is opened. When
  a file lacks the metric (Iceberg keeps metrics for the first 100 columns by default) or counts
  a null (a deleted row may be the one), the column is scanned whole, as dbt does.
-#}
{% test dynamodb_not_null(model, column_name) -%}
  {%- set table = _dynamodb_final_table(model) -%}
  {%- if table is not none and _dynamodb_metadata_has_no_null(model, column_name) %}
select file_path, readable_metrics.{{ dynamodb_quote(column_name) }}.null_value_count as nulls
from {{ model }}.files
where content = 0 and readable_metrics.{{ dynamodb_quote(column_name) }}.null_value_count != 0
  {%- else -%}
{{ dbt.default__test_not_null(model, column_name) }}
  {%- endif -%}
{%- endtest %}

{#- True when Iceberg's metadata proves `column_name` of `model` holds no null. -#}
{% macro _dynamodb_metadata_has_no_null(model, column_name) -%}
  {%- if not execute -%}{{ return(false) }}{%- endif -%}
  {%- set metric = 'readable_metrics.' ~ dynamodb_quote(column_name) ~ '.null_value_count' -%}
  {%- set query -%}
    select count(*), count({{ metric }}), coalesce(sum({{ metric }}), 0)
    from {{ model }}.files where content = 0
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {{ return(row[0] == row[1] and row[2] == 0) }}
{%- endmacro %}
