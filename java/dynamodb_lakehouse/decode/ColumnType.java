package dynamodb_lakehouse.decode;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A column's type as the plan gives it ({@code ingestion.schema.types.ColumnType}): {@code
 * string}, {@code boolean}, {@code binary}, {@code bigint}, {@code decimal}, {@code struct} (its
 * fields by DynamoDB map key), {@code array} (its element), or {@code number} (a numeric key's
 * canonical text).
 */
final class ColumnType {
  final String kind;
  final int precision;
  final int scale;
  final List<String> fieldNames; // DynamoDB map keys, in the struct's order
  final List<ColumnType> fieldTypes;
  final Map<String, Integer> fieldIndex;
  final ColumnType element;

  private ColumnType(JsonNode plan) {
    kind = plan.get("kind").asText();
    precision = plan.path("precision").asInt(0);
    scale = plan.path("scale").asInt(0);
    List<String> names = new ArrayList<>();
    List<ColumnType> types = new ArrayList<>();
    Map<String, Integer> index = new HashMap<>();
    for (JsonNode field : plan.path("fields")) {
      index.put(field.get("name").asText(), names.size());
      names.add(field.get("name").asText());
      types.add(new ColumnType(field.get("type")));
    }
    fieldNames = Collections.unmodifiableList(names);
    fieldTypes = Collections.unmodifiableList(types);
    fieldIndex = index;
    element = plan.hasNonNull("element") ? new ColumnType(plan.get("element")) : null;
  }

  static ColumnType of(JsonNode plan) {
    return new ColumnType(plan);
  }
}
