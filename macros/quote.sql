{#- Identifier quoting for Spark SQL: backticks, embedded backticks doubled. Kept although the
    project's column rule gives [a-z0-9_]: a person may name a column in the schema file
    ("column"), and a model's YAML names the columns a test reads. -#}
{% macro dynamodb_quote(identifier) -%}
  `{{ identifier | replace('`', '``') }}`
{%- endmacro %}

{#- Each identifier of `identifiers` quoted (dynamodb_quote), as a list. -#}
{% macro dynamodb_quote_list(identifiers) -%}
  {%- set quoted = [] -%}
  {%- for identifier in identifiers -%}{%- do quoted.append(dynamodb_quote(identifier)) -%}{%- endfor -%}
  {{ return(quoted) }}
{%- endmacro %}

{#- String literals of `values`, comma-separated, for an `in (...)` list (batch ids). -#}
{% macro dynamodb_quoted_list(values) -%}
  {%- for value in values -%}'{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}
