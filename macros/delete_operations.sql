{#- Every operation that ends an item in DynamoDB: a delete, or a TTL expiry. -#}
{% macro dynamodb_all_delete_operations() -%}
('delete', 'ttl_delete')
{%- endmacro %}

{#-
  The `_operation` values that delete the final row: both, unless the table's config says
  `ttl_deletes: keep`, which keeps the row of a TTL expiry (with its last image) flagged
  `_operation = 'ttl_delete'`.
-#}
{% macro dynamodb_delete_operations(table) -%}
  {%- set config = dynamodb_entry(table) or {} -%}
  {%- if config.get('ttl_deletes', 'delete') == 'keep' -%}
('delete')
  {%- else -%}
{{ dynamodb_all_delete_operations() }}
  {%- endif -%}
{%- endmacro %}
