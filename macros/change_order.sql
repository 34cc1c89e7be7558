{#-
  The rules of changes, one macro each. They mirror ingestion/dynamodb/change_order.py, and
  tests/dynamodb/test_change_order.py compiles them and checks that both say the same.
-#}

{#-
  The version guard: a change is newer than a row when its `_version` (a full export's time, an
  incremental export's window end, or for a stream change the end of its second, in epoch
  microseconds) is higher, or, at
  equal versions, when its `_sequence` (the stream's SequenceNumber, zero-padded; null for
  exports) is higher.
-#}
{% macro dynamodb_is_newer(change, target, or_equal=false) -%}
({{ change }}.`_version` > {{ target }}.`_version` or ({{ change }}.`_version` = {{ target }}.`_version` and coalesce({{ change }}.`_sequence`, '') {{ '>=' if or_equal else '>' }} coalesce({{ target }}.`_sequence`, '')))
{%- endmacro %}

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
  {%- set config = var('dynamodb_tables', {}).get(table) or {} -%}
  {%- if config.get('ttl_deletes', 'delete') == 'keep' -%}
('delete')
  {%- else -%}
{{ dynamodb_all_delete_operations() }}
  {%- endif -%}
{%- endmacro %}

{#-
  The order of a key's changes: the greatest is its latest. Version, then sequence; ingestion time
  and batch id break exact ties deterministically, and at equal versions a delete wins. `change`:
  the alias of the relation whose columns it orders (none: unprefixed).
-#}
{% macro dynamodb_change_order(change=none) -%}
  {%- set p = (change ~ '.') if change else '' -%}
struct({{ p }}`_version`, coalesce({{ p }}`_sequence`, ''), {{ p }}`_ingested_at`, {{ p }}`_batch_id`, {{ p }}`_operation` in {{ dynamodb_all_delete_operations() }})
{%- endmacro %}

{#- The columns dynamodb_change_order() reads. -#}
{% macro dynamodb_change_order_columns() -%}
  {{ return(['_version', '_sequence', '_ingested_at', '_batch_id', '_operation']) }}
{%- endmacro %}

{#-
  The version (export time) of the newest full export staged in `relation`, or among `batches`
  when given; null when there is none.
-#}
{% macro dynamodb_newest_full_export_sql(relation, batches=none) -%}
select max(`_version`) from {{ relation }} where `_operation` = 'snapshot'
{%- if batches is not none %} and `_batch_id` in ({{ dynamodb_quoted_list(batches) if batches else "''" }}){% endif %}
{%- endmacro %}

{#-
  The full-export baseline, for one change (columns of `change`, or unprefixed without it): the
  change removes its key's row when it is a delete, or when it is older than `floor`, the version
  of the newest full export staged (an item missing from that export was deleted before it; none:
  no full export). The incremental merge and the full build apply the same rule.
-#}
{% macro dynamodb_removes_the_row(table, floor, change=none) -%}
  {%- set prefix = (change ~ '.') if change else '' -%}
({{ prefix }}`_operation` in {{ dynamodb_delete_operations(table) }}{% if floor is not none %} or {{ prefix }}`_version` < {{ floor }}{% endif %})
{%- endmacro %}

{#- A key's latest change (columns unprefixed) leaves a row: the baseline rule over `staged`. -#}
{% macro dynamodb_leaves_a_row(table, staged) -%}
  {%- if dynamodb_one_full_export() -%}true{%- else -%}
not {{ dynamodb_removes_the_row(table, 'coalesce((' ~ dynamodb_newest_full_export_sql(staged) ~ '), 0)') }}
  {%- endif -%}
{%- endmacro %}
