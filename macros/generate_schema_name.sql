{#- A model's `schema` config is the namespace itself (staging, lakehouse), not a suffix. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
  {{ (custom_schema_name or target.schema) | trim }}
{%- endmacro %}
