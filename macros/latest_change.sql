{#-
  The latest change per key of `relation`: the row with the highest (`_version`, `_sequence`,
  `_ingested_at`, `_batch_id`, delete last): ties are broken deterministically, and at equal version a delete wins.
  One aggregation over whole rows (max_by of a struct), so no column list is needed and a new
  column in staging flows through untouched.
-#}
{% macro dynamodb_latest_change_per_key(relation, keys) -%}
  {%- if not keys -%}
    {{ exceptions.raise_compiler_error("dynamodb_latest_change_per_key needs the key columns") }}
  {%- endif -%}
  {%- set quoted = [] -%}
  {%- for key in keys -%}{%- do quoted.append(lakehouse_quote(key)) -%}{%- endfor -%}
select latest.change.*
from (
    select max_by(struct(*), struct(`_version`, coalesce(`_sequence`, ''), `_ingested_at`, `_batch_id`, `_operation` in ('delete', 'ttl_delete'))) as change
    from {{ relation }}
    group by {{ quoted | join(', ') }}
) as latest
{%- endmacro %}
