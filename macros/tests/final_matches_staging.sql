{#-
  The final table against its staging change log (run them after a merge: a change staged but not
  merged yet makes them fail, which is what they are for). The latest staged change of every key
  is computed here with the model's own rule macros (macros/change_order.sql).
-#}
{% macro dynamodb_expected_latest(table) -%}
  {%- set staged = source('dynamodb', table) -%}
  {{ dynamodb_latest_change_per_key(staged, dynamodb_key_columns(table)) }}
{%- endmacro %}

{#- Fails with one row per key present in the final table whose latest staged change is a delete. -#}
{% test dynamodb_no_deleted_keys(model, table) %}
  {%- set keys = [] -%}
  {%- for key in dynamodb_key_columns(table) -%}{%- do keys.append(lakehouse_quote(key)) -%}{%- endfor %}
with expected as ({{ dynamodb_expected_latest(table) }})
select {% for key in keys %}final.{{ key }}{{ ", " if not loop.last }}{% endfor %}
from {{ model }} as final
join expected
  on {% for key in keys %}final.{{ key }} = expected.{{ key }}{{ " and " if not loop.last }}{% endfor %}
where expected.`_operation` in {{ dynamodb_delete_operations(table) }}
{% endtest %}

{#- Fails when the final row count differs from the number of keys whose latest change is not a delete. -#}
{% test dynamodb_rows_match_latest_changes(model, table) %}
with expected as ({{ dynamodb_expected_latest(table) }}),
counts as (
  select
    (select count(*) from {{ model }}) as final_rows,
    (select count(*) from expected where {{ dynamodb_leaves_a_row(table, source('dynamodb', table)) }}) as expected_rows
)
select * from counts where final_rows != expected_rows
{% endtest %}
