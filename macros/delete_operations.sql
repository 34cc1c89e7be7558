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
  {%- if dynamodb_keeps_ttl_expiries(table) -%}
('delete')
  {%- else -%}
{{ dynamodb_all_delete_operations() }}
  {%- endif -%}
{%- endmacro %}

{#- Whether the table's config says `ttl_deletes: keep` (a TTL expiry's row stays, flagged). -#}
{% macro dynamodb_keeps_ttl_expiries(table) -%}
  {{ return((dynamodb_entry(table) or {}).get('ttl_deletes', 'delete') == 'keep') }}
{%- endmacro %}

{#-
  A kept TTL expiry (columns of `row`, or unprefixed) under `ttl_deletes: keep`, else false: the
  full-export baseline never removes it (an expired item is absent from every later export by
  definition, so its absence says nothing); a newer change of its key replaces it as usual.
-#}
{% macro dynamodb_is_kept_expiry(table, row=none) -%}
  {%- if dynamodb_keeps_ttl_expiries(table) -%}
({{ (row ~ '.') if row else '' }}`_operation` <=> 'ttl_delete')
  {%- else -%}
false
  {%- endif -%}
{%- endmacro %}
