{#- Fails when the final row count (of the tested keys) differs from the number of keys whose
    latest change is not a delete. -#}
{% test dynamodb_rows_match_latest_changes(model, table) %}
{%- if dynamodb_copied_full_export(table, model) %}
{#- A copy of one full export: the record counts of both tables (macros/test_scope.sql). #}
with counts as (
  select
    (select coalesce(sum(record_count), 0) from {{ model }}.files where content = 0) as final_rows,
    (select coalesce(sum(record_count), 0) from {{ dynamodb_staging_relation(table) }}.files where content = 0) as expected_rows
)
select * from counts where final_rows != expected_rows
{%- else %}
with expected as ({{ dynamodb_expected_latest(table) }}),
counts as (
  select
    (select count(*) from {{ dynamodb_tested(table, model) }}) as final_rows,
    (select count(*) from expected where {{ dynamodb_leaves_a_row(table, dynamodb_change_log(table)) }}) as expected_rows
)
select * from counts where final_rows != expected_rows
{%- endif %}
{% endtest %}
