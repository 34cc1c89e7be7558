{#-
  A final table as of an instant, from its history (`history: true`, docs/history.md): a subquery
  with the history's columns less `_valid_from` and `_valid_to`, the rows valid at `instant` (a
  timestamp literal's text, UTC), less the deletes the final table leaves out. In a model:

    select * from {{ dynamodb_as_of('orders', '2026-01-01 00:00:00') }} as orders

  The same filter `ddb-lakehouse query --as-of` applies (ingestion/jobs/as_of.py).
-#}
{% macro dynamodb_as_of(table, instant) -%}
  {%- set history = ref(table ~ '__history') -%}
  {%- set columns = adapter.get_columns_in_relation(history) | map(attribute='name')
        | reject('in', ['_valid_from', '_valid_to']) | list if execute else ['*'] -%}
(
    select {{ (dynamodb_quote_list(columns) if execute else columns) | join(', ') }}
    from {{ history }}
    where `_valid_from` <= timestamp '{{ instant }}'
      and (`_valid_to` is null or `_valid_to` > timestamp '{{ instant }}')
      and `_operation` not in {{ dynamodb_delete_operations(table) }}
)
{%- endmacro %}
