{#-
  The latest change per key of `relation`: the row with the greatest dynamodb_change_order()
  (macros/change_order.sql).
  One aggregation over whole rows (max_by of a struct), so no column list is needed and a new
  column in staging flows through untouched. None at all for the first build of a table whose
  change log holds one full export and nothing else (dynamodb_one_full_export).
-#}
{% macro dynamodb_latest_change_per_key(relation, keys) -%}
  {%- if not keys -%}
    {{ exceptions.raise_compiler_error("dynamodb_latest_change_per_key needs the key columns") }}
  {%- endif -%}
  {%- set quoted = dynamodb_quote_list(keys) -%}
  {%- if dynamodb_one_full_export() %}
select * from {{ relation }}
  {%- else %}
select latest.change.*
from (
    select max_by(struct(*), {{ dynamodb_change_order() }}) as change
    from {{ relation }}
    group by {{ quoted | join(', ') }}
) as latest
  {%- endif -%}
{%- endmacro %}
