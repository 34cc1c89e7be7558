{#- Identifier quoting for Spark SQL: backticks, embedded backticks doubled. -#}
{% macro lakehouse_quote(identifier) -%}
  `{{ identifier | replace('`', '``') }}`
{%- endmacro %}

{#- Each identifier of `identifiers` quoted (lakehouse_quote), as a list. -#}
{% macro lakehouse_quote_list(identifiers) -%}
  {%- set quoted = [] -%}
  {%- for identifier in identifiers -%}{%- do quoted.append(lakehouse_quote(identifier)) -%}{%- endfor -%}
  {{ return(quoted) }}
{%- endmacro %}

{#- String literals of `values`, comma-separated, for an `in (...)` list (batch ids). -#}
{% macro dynamodb_quoted_list(values) -%}
  {%- for value in values -%}'{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}
