{#- Fails with one row per key present in the final table whose latest staged change is a delete. -#}
{% test dynamodb_no_deleted_keys(model, table) %}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) %}
  {%- if dynamodb_copied_full_export(table, model) %}
{#- A copy of one full export: no staged change is a delete (macros/test_scope.sql). #}
select {{ keys | join(', ') }} from {{ model }} where false
  {%- else %}
with expected as ({{ dynamodb_expected_latest(table) }}),
final as (select * from {{ dynamodb_tested(table, model) }})
select {% for key in keys %}final.{{ key }}{{ ", " if not loop.last }}{% endfor %}
from final
join expected
  on {% for key in keys %}final.{{ key }} = expected.{{ key }}{{ " and " if not loop.last }}{% endfor %}
where expected.`_operation` in {{ dynamodb_delete_operations(table) }}
  {%- endif %}
{% endtest %}
