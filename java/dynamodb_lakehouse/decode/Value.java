package dynamodb_lakehouse.decode;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.Map;

/**
 * One DynamoDB attribute value (a JSON object with one type descriptor: {@code {"S": "x"}}), as
 * Spark's JSON parser would fill staging's {@code VALUE} struct from it: JSON {@code null} is no
 * value, fields that are no descriptor are ignored.
 *
 * <p>A value is <em>malformed</em> when it holds two descriptors or a descriptor of the wrong
 * JSON kind ({@code {"BOOL": "yes"}}, {@code {"M": []}}, {@code {"NULL": false}}): DynamoDB never
 * writes one. It decodes to nothing, so it fits no column: a drift, kept whole in the remainder.
 * (Spark SQL's decode dropped the whole item's parse on such a value: decision 0013.)
 */
final class Value {
  static final String[] DESCRIPTORS = {"S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "M", "L"};
  static final int S = 0, N = 1, B = 2, BOOL = 3, NULL = 4, SS = 5, NS = 6, BS = 7, M = 8, L = 9;
  /** No descriptor at all: an object without one, or a JSON value that is no object. */
  static final int UNKNOWN = -1;
  static final int MALFORMED = -2;

  private Value() {}

  private static int index(String name) {
    switch (name) {
      case "S": return S;
      case "N": return N;
      case "B": return B;
      case "BOOL": return BOOL;
      case "NULL": return NULL;
      case "SS": return SS;
      case "NS": return NS;
      case "BS": return BS;
      case "M": return M;
      case "L": return L;
      default: return UNKNOWN;
    }
  }

  /** The value's descriptor, {@link #UNKNOWN} or {@link #MALFORMED}; the value is not null. */
  static int descriptor(JsonNode value) {
    if (!value.isObject()) return UNKNOWN;
    int found = UNKNOWN;
    for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> field = it.next();
      int d = index(field.getKey());
      if (d == UNKNOWN || field.getValue().isNull()) continue;
      if (found != UNKNOWN || !wellFormed(d, field.getValue())) return MALFORMED;
      found = d;
    }
    return found;
  }

  private static boolean wellFormed(int d, JsonNode content) {
    switch (d) {
      case S: case N: case B: return content.isTextual();
      case BOOL: return content.isBoolean();
      case NULL: return content.isBoolean() && content.booleanValue();
      case SS: case NS: case BS:
        if (!content.isArray()) return false;
        for (JsonNode element : content) if (!element.isTextual()) return false;
        return true;
      case M: return content.isObject();
      case L: return content.isArray();
      default: return false;
    }
  }

  /** No value, or DynamoDB's NULL: never decides a type, never a drift. */
  static boolean absent(JsonNode value) {
    return value == null || value.isNull() || descriptor(value) == NULL;
  }

  /** The content under descriptor {@code d} when that is the value's descriptor, else null. */
  static JsonNode content(JsonNode value, int d) {
    if (value == null || value.isNull() || descriptor(value) != d) return null;
    return value.get(DESCRIPTORS[d]);
  }

  static String text(JsonNode value, int d) {
    JsonNode content = content(value, d);
    return content == null ? null : content.textValue();
  }
}
