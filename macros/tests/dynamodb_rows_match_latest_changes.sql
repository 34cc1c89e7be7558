{#- Fails when the final rows (of the tested keys) are not one per key whose latest change leaves a
    row, each at that change's version (`_version`, `_sequence`): a row the merge left behind
    (a batch staged and not merged, a refused merge) fails it as a missing or extra row does. -#}
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
{%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) %}
with expected as ({{ dynamodb_expected_latest(table) }}),
kept as (select * from expected where {{ dynamodb_leaves_a_row(table, dynamodb_change_log(table)) }}),
final_rows as (select * from {{ dynamodb_tested(table, model, (keys + ['`_version`', '`_sequence`']) | join(', ')) }}),
counts as (
  select
    (select count(*) from final_rows) as final_rows,
    (select count(*) from kept) as expected_rows,
    (select count(*) from final_rows as row inner join kept
      on {% for key in keys %}row.{{ key }} = kept.{{ key }} and {% endfor -%}
      row.`_version` = kept.`_version` and row.`_sequence` <=> kept.`_sequence`) as rows_at_their_version
)
select * from counts where final_rows != expected_rows or rows_at_their_version != expected_rows
{%- endif %}
{% endtest %}
