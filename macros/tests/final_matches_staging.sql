{#-
  The final table against its staging change log (run them after a merge: a change staged but not
  merged yet makes them fail, which is what they are for). The latest staged change of every key
  is computed here the same way the model does, with the re-baseline rule of full exports.
-#}
{% macro dynamodb_expected_latest(table) -%}
  {%- set staged = source('dynamodb', table) -%}
  with latest as (
    {{ dynamodb_latest_change_per_key(staged, dynamodb_key_columns(table)) }}
  ),
  baseline as (
    select coalesce(max(`_version`), 0) as version from {{ staged }} where `_operation` = 'snapshot'
  )
  select latest.*, latest.`_version` >= (select version from baseline) as in_baseline from latest
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
    (select count(*) from expected where `_operation` not in {{ dynamodb_delete_operations(table) }} and in_baseline) as expected_rows
)
select * from counts where final_rows != expected_rows
{% endtest %}
