{#-
  How changes compare, in one place for the model, the merge strategy and the tests.

  A change is newer than another when its `_version` (DynamoDB write time, export time, or for a
  stream change the end of its second, in epoch microseconds) is higher, or, at equal versions,
  when its `_sequence` (the stream's SequenceNumber, zero-padded; null for exports) is higher.
-#}
{% macro dynamodb_is_newer(change, target, or_equal=false) -%}
({{ change }}.`_version` > {{ target }}.`_version` or ({{ change }}.`_version` = {{ target }}.`_version` and coalesce({{ change }}.`_sequence`, '') {{ '>=' if or_equal else '>' }} coalesce({{ target }}.`_sequence`, '')))
{%- endmacro %}

{#-
  The `_operation` values that delete the final row: 'delete', and 'ttl_delete' (an item DynamoDB's
  TTL expired) unless the table's config says `ttl_deletes: keep`, which keeps the row (with its
  last image) flagged `_operation = 'ttl_delete'`.
-#}
{% macro dynamodb_delete_operations(table) -%}
  {%- set config = var('dynamodb_tables', {}).get(table) or {} -%}
  {%- if config.get('ttl_deletes', 'delete') == 'keep' -%}
('delete')
  {%- else -%}
('delete', 'ttl_delete')
  {%- endif -%}
{%- endmacro %}
