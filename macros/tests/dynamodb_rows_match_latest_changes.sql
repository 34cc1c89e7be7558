{#- Fails when the final row count (of the tested keys) differs from the number of keys whose
    latest change is not a delete. -#}
{% test dynamodb_rows_match_latest_changes(model, table) %}
with expected as ({{ dynamodb_expected_latest(table) }}),
counts as (
  select
    (select count(*) from {{ dynamodb_tested(table, model) }}) as final_rows,
    (select count(*) from expected where {{ dynamodb_leaves_a_row(table, source('dynamodb', table)) }}) as expected_rows
)
select * from counts where final_rows != expected_rows
{% endtest %}
