package dynamodb_lakehouse.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.RowFactory;

/**
 * One attribute value decoded to its column type: the rules of {@code
 * ingestion/schema/typed_columns.py} ({@code typed}). The result is null when the value is
 * absent, NULL or does not fit, so "it fits" is always {@code Value.absent(value) || decoded !=
 * null}.
 *
 * <p><b>Plain</b> decode gives what the column holds. <b>Exact</b> decode is null also where the
 * column cannot give the value back exactly (decision 0012's remainder): NULL below the top, a
 * descriptor the column does not stand for (anything but S in a string column, a set in a column
 * of lists, a list in a set's column). Where it is not null it equals the plain decode.
 *
 * <p><b>Types of the first items.</b> With {@code seen} (detection's record of the path: {@code
 * dynamodb_types}, {@code fields}, {@code element}), a value whose descriptor detection did not see
 * there does not fit ({@code typed_columns.guarded}).
 */
final class Decode {
  static final JsonFactory JSON = new JsonFactory();
  private static final int MAX_DEPTH = 32; // DynamoDB's own nesting limit
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private Decode() {}

  /**
   * {@code value} decoded to {@code type}. {@code exact}: the exact decode; {@code sets}: the set
   * descriptor a top-level array column stands for under the exact decode (-1: a list).
   */
  static Object typed(JsonNode value, ColumnType type, Seen seen, boolean exact, int sets) {
    if (value == null || value.isNull()) return null;
    if (seen != null && !Seen.allows(seen, Value.descriptor(value))) return null;
    switch (type.kind) {
      case "string":
        return exact ? Value.text(value, Value.S) : text(value);
      case "boolean": {
        JsonNode content = Value.content(value, Value.BOOL);
        return content == null ? null : content.booleanValue();
      }
      case "binary":
        return binary(Value.text(value, Value.B));
      case "bigint":
        return Numbers.asLong(Value.text(value, Value.N));
      case "number":
        return Numbers.canonical(Value.text(value, Value.N));
      case "decimal":
        return Numbers.asDecimal(Value.text(value, Value.N), type.precision, type.scale);
      case "struct":
        return struct(value, type, seen, exact);
      case "array":
        return array(value, type, seen, exact, sets);
      default:
        throw new IllegalArgumentException("unknown column type " + type.kind);
    }
  }

  private static byte[] binary(String text) {
    if (text == null) return null;
    try {
      return Base64.getDecoder().decode(text);
    } catch (IllegalArgumentException e) { // not base64: it fits no binary column (a drift)
      return null;
    }
  }

  private static Object struct(JsonNode value, ColumnType type, Seen seen, boolean exact) {
    JsonNode map = Value.content(value, Value.M);
    if (map == null) return null;
    Object[] fields = new Object[type.fieldNames.size()];
    for (int i = 0; i < fields.length; i++) {
      String name = type.fieldNames.get(i);
      JsonNode field = map.get(name);
      Object decoded = typed(field, type.fieldTypes.get(i), Seen.field(seen, name), exact, -1);
      boolean fits = exact ? field == null || field.isNull() || decoded != null
          : Value.absent(field) || decoded != null;
      if (!fits) return null;
      fields[i] = decoded;
    }
    for (Iterator<String> names = map.fieldNames(); names.hasNext(); ) {
      if (!type.fieldIndex.containsKey(names.next())) return null; // a key the struct lacks
    }
    return RowFactory.create(fields);
  }

  private static Object array(
      JsonNode value, ColumnType type, Seen seen, boolean exact, int sets) {
    JsonNode list = Value.content(value, Value.L);
    List<JsonNode> elements = new ArrayList<>();
    int set = -1;
    if (exact) {
      if (sets >= 0) set = sets;
      else if (list == null) return null;
    } else if (list == null) {
      set = Value.descriptor(value);
      if (set != Value.SS && set != Value.NS && set != Value.BS) return null;
    }
    if (set >= 0) {
      JsonNode members = Value.content(value, set);
      if (members == null) return null;
      String scalar = Value.DESCRIPTORS[set].substring(0, 1); // SS -> S
      for (JsonNode member : members) {
        ObjectNode element = NODES.objectNode();
        element.set(scalar, member);
        elements.add(element);
      }
    } else {
      list.forEach(elements::add);
    }
    Seen below = Seen.element(seen);
    List<Object> values = new ArrayList<>(elements.size());
    for (JsonNode element : elements) {
      Object decoded = typed(element, type.element, below, exact, -1);
      boolean fits = exact ? decoded != null : Value.absent(element) || decoded != null;
      if (!fits) return null;
      values.add(decoded);
    }
    if (set >= 0) values.sort(ORDER); // a set: in Spark's array_sort order
    return values;
  }

  /** Spark's order of an array's values (array_sort): strings by code point, numbers by value,
   * binary by unsigned bytes; nulls last. */
  static final Comparator<Object> ORDER = (a, b) -> {
    if (a == null || b == null) return a == null ? (b == null ? 0 : 1) : -1;
    if (a instanceof String) return codePoints((String) a, (String) b);
    if (a instanceof byte[]) return bytes((byte[]) a, (byte[]) b);
    if (a instanceof BigDecimal) return ((BigDecimal) a).compareTo((BigDecimal) b);
    if (a instanceof Long) return ((Long) a).compareTo((Long) b);
    if (a instanceof Boolean) return ((Boolean) a).compareTo((Boolean) b);
    return 0;
  };

  static int codePoints(String a, String b) {
    int i = 0, j = 0;
    while (i < a.length() && j < b.length()) {
      int x = a.codePointAt(i), y = b.codePointAt(j);
      if (x != y) return Integer.compare(x, y);
      i += Character.charCount(x);
      j += Character.charCount(y);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }

  private static int bytes(byte[] a, byte[] b) {
    for (int i = 0; i < Math.min(a.length, b.length); i++) {
      int x = a[i] & 0xff, y = b[i] & 0xff;
      if (x != y) return Integer.compare(x, y);
    }
    return Integer.compare(a.length, b.length);
  }

  // --- text, for string columns ----------------------------------------------------------------

  /**
   * A value as a string column's text ({@code values.text_sql}): S as is, N its exact digits,
   * BOOL true/false, B its base64; sets as JSON arrays sorted by code point (number sets as
   * unquoted numbers); maps and lists as plain JSON (null deeper than DynamoDB allows). NULL and
   * malformed values: null.
   */
  static String text(JsonNode value) {
    int d = Value.descriptor(value);
    switch (d) {
      case Value.S: case Value.N: case Value.B:
        return value.get(Value.DESCRIPTORS[d]).textValue();
      case Value.BOOL:
        return value.get("BOOL").booleanValue() ? "true" : "false";
      case Value.SS: case Value.NS: case Value.BS:
        return sortedSet(value.get(Value.DESCRIPTORS[d]), d == Value.NS);
      case Value.M: case Value.L:
        return plainJson(value);
      default:
        return null;
    }
  }

  private static String sortedSet(JsonNode members, boolean numbers) {
    List<String> sorted = new ArrayList<>();
    members.forEach(m -> sorted.add(m.textValue()));
    sorted.sort(Decode::codePoints);
    return write(g -> {
      g.writeStartArray();
      for (String member : sorted) {
        if (numbers) g.writeRawValue(member);
        else g.writeString(member);
      }
      g.writeEndArray();
    });
  }

  /** Plain JSON of a map or list ({@code values.dynamodb_to_json}): numbers as JSON numbers with
   * their exact digits, binary as base64 strings, sets as arrays in their order, key order kept;
   * null when nesting goes deeper than DynamoDB allows or a value is malformed. */
  static String plainJson(JsonNode value) {
    try {
      return writeUtf8(g -> plain(g, value, 0)); // as the item's text has its characters
    } catch (NotPlain e) {
      return null;
    }
  }

  private static final class NotPlain extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotPlain() {
      super(null, null, false, false);
    }
  }

  private static void plain(JsonGenerator g, JsonNode value, int depth) throws IOException {
    int d = value == null || value.isNull() ? Value.UNKNOWN : Value.descriptor(value);
    switch (d) {
      case Value.S: case Value.B:
        g.writeString(value.get(Value.DESCRIPTORS[d]).textValue());
        return;
      case Value.N:
        g.writeRawValue(value.get("N").textValue());
        return;
      case Value.BOOL:
        g.writeBoolean(value.get("BOOL").booleanValue());
        return;
      case Value.NULL:
        g.writeNull();
        return;
      case Value.SS: case Value.NS: case Value.BS:
        g.writeStartArray();
        for (JsonNode member : value.get(Value.DESCRIPTORS[d])) {
          if (d == Value.NS) g.writeRawValue(member.textValue());
          else g.writeString(member.textValue());
        }
        g.writeEndArray();
        return;
      case Value.M:
        if (depth >= MAX_DEPTH) throw new NotPlain();
        g.writeStartObject();
        for (Iterator<java.util.Map.Entry<String, JsonNode>> it = value.get("M").fields(); it.hasNext(); ) {
          java.util.Map.Entry<String, JsonNode> entry = it.next();
          g.writeFieldName(entry.getKey());
          plain(g, entry.getValue(), depth + 1);
        }
        g.writeEndObject();
        return;
      case Value.L:
        if (depth >= MAX_DEPTH) throw new NotPlain();
        g.writeStartArray();
        for (JsonNode element : value.get("L")) plain(g, element, depth + 1);
        g.writeEndArray();
        return;
      default:
        throw new NotPlain();
    }
  }

  interface Writing {
    void write(JsonGenerator g) throws IOException;
  }

  static String write(Writing writing) {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = JSON.createGenerator(out)) {
      writing.write(g);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /** JSON as Spark's parser writes a value it keeps as text (UTF-8 bytes: a character beyond
   * the BMP escaped as its surrogate pair), where {@link #write} is as {@code to_json} writes. */
  static String writeUtf8(Writing writing) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    try (JsonGenerator g = JSON.createGenerator(out, com.fasterxml.jackson.core.JsonEncoding.UTF8)) {
      writing.write(g);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new String(out.toByteArray(), java.nio.charset.StandardCharsets.UTF_8);
  }

  /** A JSON object key as Spark writes it (quoted, escaped), for the remainder. */
  static String key(String name) {
    return write(g -> g.writeString(name));
  }

  /** Detection's record of a path, for types of the first items: the descriptors it saw there
   * (a value of another does not fit), and the records of its fields and elements. */
  static final class Seen {
    private final boolean[] allowed; // by descriptor; null: any
    private final java.util.Map<String, Seen> fields = new java.util.HashMap<>();
    private final Seen element;

    private Seen(JsonNode record) {
      JsonNode kinds = record.get("dynamodb_types");
      if (kinds != null && kinds.isObject()) {
        allowed = new boolean[Value.DESCRIPTORS.length];
        allowed[Value.NULL] = true; // NULL is no value: always allowed
        boolean any = false;
        for (int d = 0; d < allowed.length; d++) {
          if (d != Value.NULL && kinds.has(Value.DESCRIPTORS[d])) {
            allowed[d] = true;
            any = true;
          }
        }
        if (!any) allowed[Value.S] = true; // only NULL seen: its type, text, is what S gives
      } else {
        allowed = null;
      }
      JsonNode below = record.get("fields");
      if (below != null && below.isObject()) {
        below.fields().forEachRemaining(e -> {
          if (e.getValue().isObject()) fields.put(e.getKey(), new Seen(e.getValue()));
        });
      }
      JsonNode elements = record.get("element");
      element = elements != null && elements.isObject() ? new Seen(elements) : null;
    }

    static Seen of(JsonNode record) {
      return record == null || !record.isObject() ? null : new Seen(record);
    }

    /** Whether a value of descriptor {@code d} may be here (one without a known descriptor
     * always: it fits nothing anyway). */
    static boolean allows(Seen seen, int d) {
      return seen.allowed == null || d < 0 || seen.allowed[d];
    }

    static Seen field(Seen seen, String name) {
      return seen == null ? null : seen.fields.get(name);
    }

    static Seen element(Seen seen) {
      return seen == null ? null : seen.element;
    }
  }
}
