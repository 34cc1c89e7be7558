{#-
  A ledger key of a staging commit's Iceberg snapshot summary, as a SQL string literal: `name` is
  one of vars.lakehouse_summary_keys (batch_id, kind, ledger), which mirror SUMMARY_KEYS of
  ingestion/config/names.py (tests/config/test_names.py checks them).
-#}
{% macro _dynamodb_summary_key(name) -%}
  {%- set keys = var('lakehouse_summary_keys') -%}
  {%- if name not in keys -%}
    {{ exceptions.raise_compiler_error("no summary key " ~ name ~ " in vars.lakehouse_summary_keys") }}
  {%- endif -%}
'{{ keys[name] }}'
{%- endmacro %}
