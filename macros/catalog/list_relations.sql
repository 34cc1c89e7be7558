{#-
  Relations of a schema, for catalogs where `show table extended` is unsupported (Iceberg v2
  tables, e.g. the embedded JDBC catalog). dbt-spark's own fallback runs `show tables` (which
  omits views) plus one `describe` per table. Without this, dbt cannot see the Iceberg tables as
  such and silently re-creates an incremental model on every run instead of merging.
  Every table of the lakehouse catalog is an Iceberg table; views are listed by `show views`.
  Returns rows of (schema, name, is_temporary, information), as dbt-spark's adapter expects.
-#}
{% macro spark__list_relations_without_caching(relation) %}
  {% call statement('lakehouse_show_tables', fetch_result=True) -%}
    show tables in {{ adapter.quote(relation.schema) }}
  {%- endcall %}
  {% call statement('lakehouse_show_views', fetch_result=True) -%}
    show views in {{ adapter.quote(relation.schema) }}
  {%- endcall %}
  {% set rows = [] %}
  {% for row in load_result('lakehouse_show_tables').table %}
    {% do rows.append([row[0], row[1], false, "Type: MANAGED\nProvider: iceberg\n"]) %}
  {% endfor %}
  {% for row in load_result('lakehouse_show_views').table %}
    {% if not row[2] %}
      {% do rows.append([row[0], row[1], false, "Type: VIEW\n"]) %}
    {% endif %}
  {% endfor %}
  {% do return(rows) %}
{% endmacro %}
