{#- The DynamoDB table whose final table `model` is, or none (any other model). -#}
{% macro _dynamodb_final_table(model) -%}
  {%- set table = model.identifier -%}
  {%- if dynamodb_entry(table) is not none and model.schema != dynamodb_staging_schema() -%}
    {{ return(table) }}
  {%- endif -%}
  {{ return(none) }}
{%- endmacro %}
