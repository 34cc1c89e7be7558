/*
 * A probe, not the product's decoder: one streaming pass (Jackson) over a DynamoDB JSON export
 * line, straight to the typed columns, the remainder (the top-level attributes the columns cannot
 * give back exactly, as their DynamoDB JSON text) and the names of the attributes that drifted.
 * bench/decoder_probe.py measures it beside staging's decode in Spark SQL and checks that both
 * give the same columns and remainder on every row of the export it runs on.
 *
 * It covers the types of the `orders` sample (string, bigint, decimal, boolean, struct, array)
 * and the common path exactly; it is simpler than staging on rare paths (a string column's
 * non-S values are not rendered as staging renders them, sets are not sorted, no types of the
 * first items' descriptor guard, no single-table entities). Decision 0013 says what the
 * product's decoder must add.
 */
import com.fasterxml.jackson.core.*;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.sql.types.*;
import java.math.BigDecimal;
import java.util.*;

public class DecodeProbe implements UDF3<String, String, String, Row> {
  private static final JsonFactory JSON = new JsonFactory();
  private static final Object MISFIT = new Object();
  private transient String schemaText;
  private transient StructType schema;
  private transient Map<String, Integer> index;
  private transient Set<String> keys;

  private final class State { boolean inexact; }

  @Override
  public Row call(String line, String schemaJson, String keyList) throws Exception {
    if (!schemaJson.equals(schemaText)) {
      schema = (StructType) DataType.fromJson(schemaJson);
      index = new HashMap<>();
      for (int i = 0; i < schema.fields().length; i++) index.put(schema.fields()[i].name(), i);
      keys = new HashSet<>(Arrays.asList(keyList.split(",")));
      schemaText = schemaJson;
    }
    int n = schema.fields().length;
    Object[] out = new Object[n + 3];
    StringBuilder rest = null;
    List<String> drift = null;
    String error = null;
    String written = null;
    boolean image = false;
    try (JsonParser p = JSON.createParser(line)) {
      if (p.nextToken() != JsonToken.START_OBJECT) return RowFactory.create(out);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String top = p.getCurrentName();
        JsonToken t = p.nextToken();
        if (top.equals("Item") && t == JsonToken.START_OBJECT) {
          image = true;
          boolean[] seen = new boolean[n];
          while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.getCurrentName();
            p.nextToken();
            Integer i = index.get(name);
            int start = (int) p.getTokenLocation().getCharOffset();
            if (i == null) { error = "new attribute " + name; p.skipChildren(); continue; }
            seen[i] = true;
            State s = new State();
            Object v = value(p, schema.fields()[i].dataType(), s, 0);
            int end = (int) p.getCurrentLocation().getCharOffset();
            if (v == MISFIT) {
              if (keys.contains(name)) error = "key misfit " + name;
              if (drift == null) drift = new ArrayList<>();
              drift.add(name);
              v = null;
              s.inexact = true;
            }
            if (v == null) s.inexact = true;
            if (s.inexact) {
              rest = rest == null ? new StringBuilder("{") : rest.append(',');
              rest.append('"').append(name).append("\":").append(line, start, end);
            }
            out[i] = v;
          }
          for (String k : keys) if (!seen[index.get(k)]) error = "key missing " + k;
        } else if (top.equals("Metadata") && t == JsonToken.START_OBJECT) {
          while (p.nextToken() == JsonToken.FIELD_NAME) {
            String m = p.getCurrentName();
            p.nextToken();
            if (m.equals("WriteTimestampMicros") && p.currentToken() == JsonToken.START_OBJECT) {
              while (p.nextToken() == JsonToken.FIELD_NAME) { p.nextToken(); written = p.getValueAsString(); }
            } else p.skipChildren();
          }
        } else p.skipChildren();
      }
    }
    if (!image) error = "no image";
    out[n] = rest == null ? null : rest.append('}').toString();
    out[n + 1] = drift;
    out[n + 2] = error;
    return RowFactory.create(out);
  }

  /** The value object at the parser (START_OBJECT) decoded to type t; MISFIT when it does not fit. */
  private Object value(JsonParser p, DataType t, State s, int depth) throws Exception {
    if (p.currentToken() != JsonToken.START_OBJECT) { p.skipChildren(); return MISFIT; }
    Object result = MISFIT;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String d = p.getCurrentName();
      JsonToken v = p.nextToken();
      switch (d) {
        case "S":
          if (t instanceof StringType) result = p.getText(); else result = MISFIT;
          break;
        case "N": {
          String text = p.getText();
          if (t instanceof LongType) result = asLong(text);
          else if (t instanceof DecimalType) result = asDecimal(text, (DecimalType) t);
          else if (t instanceof StringType) { result = text; s.inexact = true; }
          else result = MISFIT;
          break;
        }
        case "BOOL":
          if (t instanceof BooleanType) result = p.getBooleanValue();
          else if (t instanceof StringType) { result = p.getText(); s.inexact = true; }
          else result = MISFIT;
          break;
        case "NULL":
          result = null; if (depth > 0) s.inexact = true;
          break;
        case "M":
          if (t instanceof StructType) result = struct(p, (StructType) t, s, depth);
          else { p.skipChildren(); result = MISFIT; }
          break;
        case "L":
          if (t instanceof ArrayType) result = list(p, ((ArrayType) t).elementType(), s, depth);
          else { p.skipChildren(); result = MISFIT; }
          break;
        default:
          p.skipChildren(); result = MISFIT;
      }
    }
    return result;
  }

  private Object struct(JsonParser p, StructType t, State s, int depth) throws Exception {
    Object[] fields = new Object[t.fields().length];
    boolean fits = true;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.getCurrentName();
      p.nextToken();
      int i = t.getFieldIndex(name).isDefined() ? (Integer) t.getFieldIndex(name).get() : -1;
      if (i < 0) { p.skipChildren(); fits = false; continue; }
      Object v = value(p, t.fields()[i].dataType(), s, depth + 1);
      if (v == MISFIT) fits = false; else fields[i] = v;
    }
    return fits ? RowFactory.create(fields) : MISFIT;
  }

  private Object list(JsonParser p, DataType element, State s, int depth) throws Exception {
    List<Object> values = new ArrayList<>();
    boolean fits = true;
    while (p.nextToken() != JsonToken.END_ARRAY) {
      Object v = value(p, element, s, depth + 1);
      if (v == MISFIT || v == null) fits = false; else values.add(v);
    }
    return fits ? values : MISFIT;
  }

  private static Object asLong(String text) {
    int len = text.length();
    if (len > 0 && len <= 18) {
      boolean plain = true;
      for (int i = 0; i < len; i++) { char c = text.charAt(i); if (!(c >= '0' && c <= '9') && !(i == 0 && c == '-' && len > 1)) { plain = false; break; } }
      if (plain) return Long.parseLong(text);
    }
    try { return new BigDecimal(text).longValueExact(); } catch (ArithmeticException | NumberFormatException e) { return MISFIT; }
  }

  private static Object asDecimal(String text, DecimalType t) {
    try {
      BigDecimal d = new BigDecimal(text);
      if (d.stripTrailingZeros().scale() > t.scale()) return MISFIT;
      d = d.setScale(t.scale());
      if (d.precision() > t.precision()) return MISFIT;
      return d;
    } catch (NumberFormatException | ArithmeticException e) { return MISFIT; }
  }
}
