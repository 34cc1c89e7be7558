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
({{ change }}.`_version` > {{ target }}.`_version`
  {{- ' or (' ~ change }}.`_version` = {{ target }}.`_version`
  {{- ' and coalesce(' ~ change }}.`_sequence`, '') {{ '>=' if or_equal else '>' }} coalesce({{ target }}.`_sequence`, '')))
{%- endmacro %}

{#-
  The order of a key's changes: the greatest is its latest. Version, then sequence; ingestion time
  and batch id break exact ties deterministically, and at equal versions a delete wins. `change`:
  the alias of the relation whose columns it orders (none: unprefixed).
-#}
{% macro dynamodb_change_order(change=none) -%}
  {%- set p = (change ~ '.') if change else '' -%}
struct({{ p }}`_version`, coalesce({{ p }}`_sequence`, ''), {{ p }}`_ingested_at`, {{ p }}`_batch_id`,
  {{- ' ' ~ p }}`_operation` in {{ dynamodb_all_delete_operations() }})
{%- endmacro %}

{#- The columns dynamodb_change_order() reads. -#}
{% macro dynamodb_change_order_columns() -%}
  {{ return(['_version', '_sequence', '_ingested_at', '_batch_id', '_operation']) }}
{%- endmacro %}
