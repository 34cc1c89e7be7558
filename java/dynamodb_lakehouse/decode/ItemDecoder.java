package dynamodb_lakehouse.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Staging's decode (decision 0013): an item's DynamoDB JSON to a staging row's typed columns,
 * its drift and its remainder, in one parse per item. The plan ({@code
 * ingestion/schema/item_decoder.py}) gives the table's types and its messages; this class applies
 * the rules of {@code typed_rows.py} (keys, new attributes, drift, types of the first items,
 * single-table entities) and {@code item_json.rest_sql} (the remainder).
 *
 * <p>Called with the item's text, the row's given {@code _entity} (a rebuild keeps each row's; a
 * plan that does not take it ignores it) and whether the line carries only {@code Keys}. It
 * returns a row: the keys' columns, then the attributes' (a single-table design: {@code _entity}
 * and one struct per entity with attributes), {@code _drift}, {@code _rest}, and {@code _error}:
 * the message the batch fails with, less the line's file, which the caller appends in SQL.
 *
 * <p>A JSON {@code null} in place of an attribute's value is no value: absent, as Spark's parser
 * read it. An attribute twice in one item fails the batch (DynamoDB never writes one; which one
 * would be kept is no choice to make silently).
 */
public final class ItemDecoder implements UDF3<String, String, Boolean, Row>, Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private final String planText;
  private transient volatile Plan plan;

  public ItemDecoder(String planText) {
    this.planText = planText;
    plan(); // a broken plan fails here, on the driver, not in a task
  }

  private Plan plan() {
    Plan p = plan;
    if (p == null) {
      synchronized (this) {
        if (plan == null) plan = new Plan(planText);
        p = plan;
      }
    }
    return p;
  }

  /** One attribute of the plan: its name, type, the set it stands for and what detection saw. */
  private static final class Attribute {
    final String name;
    final ColumnType type;
    final int sets;
    final Decode.Seen seen;
    final String missing;
    final String misfit;

    Attribute(JsonNode node) {
      name = node.get("name").asText();
      type = ColumnType.of(node.get("type"));
      String set = node.path("sets").asText("");
      int found = -1;
      for (int d = 0; d < Value.DESCRIPTORS.length; d++) {
        if (Value.DESCRIPTORS[d].equals(set)) found = d;
      }
      sets = found;
      seen = Decode.Seen.of(node.get("seen"));
      missing = node.path("missing").asText(null);
      misfit = node.path("misfit").asText(null);
    }

    boolean exactFirst() {
      return type.kind.equals("struct") || type.kind.equals("array");
    }
  }

  /** The attributes of one kind of row (a table's own, or an entity's section). */
  private static final class Section {
    final String entity; // the final table (entities), or null
    final Set<String> known = new HashSet<>();
    final List<Attribute> attributes = new ArrayList<>();
    final boolean strict;

    Section(String entity, JsonNode known, JsonNode attributes, boolean strict) {
      this.entity = entity;
      known.forEach(n -> this.known.add(n.asText()));
      attributes.forEach(a -> this.attributes.add(new Attribute(a)));
      this.strict = strict;
    }
  }

  private static final class Plan {
    final String table;
    final List<Attribute> keys = new ArrayList<>();
    final String unknownDescriptor;
    final String newAttributes;
    final String sampleMisfit;
    final String notAnItem; // lines: the message of a line without an image
    final Section own; // a table without an entity rule
    final boolean entities;
    final String by;
    final String ruleAttribute;
    final Map<String, String> finals = new HashMap<>(); // entity value -> final table
    final String unmatched;
    final boolean given;
    final Map<String, Section> sections = new LinkedHashMap<>(); // by final table
    final List<Section> structs = new ArrayList<>(); // sections with attributes, in rule order

    Plan(String text) {
      JsonNode plan;
      try {
        plan = MAPPER.readTree(text);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      table = plan.get("table").asText();
      plan.get("keys").forEach(k -> keys.add(new Attribute(k)));
      unknownDescriptor = plan.get("unknown_descriptor").asText();
      newAttributes = plan.get("new_attributes").asText();
      sampleMisfit = plan.get("sample_misfit").asText();
      notAnItem = plan.path("lines").asText(null);
      JsonNode rule = plan.get("entities");
      entities = rule != null && !rule.isNull();
      if (!entities) {
        own = new Section(null, plan.get("known"), plan.get("attributes"), plan.get("strict").asBoolean());
        by = ruleAttribute = unmatched = null;
        given = false;
        return;
      }
      own = null;
      by = rule.get("by").asText();
      ruleAttribute = rule.get("attribute").asText();
      unmatched = rule.get("unmatched").asText();
      given = rule.get("given").asBoolean();
      rule.get("values").forEach(pair -> finals.put(pair.get(0).asText(), pair.get(1).asText()));
      for (JsonNode s : rule.get("sections")) {
        Section section = new Section(
            s.get("final").asText(), s.get("known"), s.get("attributes"), s.get("strict").asBoolean());
        sections.put(section.entity, section);
        if (!section.attributes.isEmpty()) structs.add(section);
      }
    }
  }


  private static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;

    Failure(String message) {
      super(message, null, false, false);
    }
  }

  @Override
  public Row call(String text, String entity, Boolean keysOnly) throws Exception {
    Plan p = plan();
    int width = p.keys.size() + (p.entities ? 1 + p.structs.size() : p.own.attributes.size()) + 3;
    Object[] out = new Object[width];
    try {
      if (p.notAnItem != null) {
        Line line = line(p, text);
        decode(p, line.item, entity, line.keysOnly, out);
      } else {
        decode(p, attributes(p, text), entity, Boolean.TRUE.equals(keysOnly), out);
      }
    } catch (Failure failure) {
      java.util.Arrays.fill(out, null);
      out[width - 1] = failure.getMessage();
    }
    return RowFactory.create(out);
  }

  /** The item's attributes by name, in the item's order (JSON null: no value). */
  private static Map<String, JsonNode> attributes(Plan p, String image) throws Failure {
    if (image == null) return new LinkedHashMap<>();
    try (JsonParser parser = Decode.JSON.createParser(image)) {
      return read(parser, parser.nextToken()).attributes(p);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) { // not JSON, or too deep
      String reason = String.valueOf(e.getOriginalMessage()).split("\n", 2)[0];
      throw new Failure("table " + p.table + ": an item is not JSON (" + reason + ") in ");
    } catch (IOException e) { // a String has no I/O: never
      throw new UncheckedIOException(e);
    }
  }

  /** An item as read: its attributes, and the first name it holds twice (its failure, raised
   * only if the item is the one decoded: a line's other images are not). */
  private static final class Image {
    final Map<String, JsonNode> item = new LinkedHashMap<>();
    String twice;

    Map<String, JsonNode> attributes(Plan p) throws Failure {
      if (twice != null) {
        throw new Failure("table " + p.table + ": an item holds attribute " + Decode.key(twice)
            + " twice (not DynamoDB JSON) in ");
      }
      return item;
    }
  }

  /** The item whose first token {@code parser} has just read; no attributes when it is not an
   * object (its keys are then missing). */
  private static Image read(JsonParser parser, JsonToken first) throws IOException {
    Image image = new Image();
    if (first != JsonToken.START_OBJECT) {
      parser.skipChildren();
      return image;
    }
    while (parser.nextToken() == JsonToken.FIELD_NAME) {
      String name = parser.getCurrentName();
      parser.nextToken();
      JsonNode value = MAPPER.readTree(parser);
      if (value == null || value.isNull()) continue;
      if (image.item.put(name, value) != null && image.twice == null) image.twice = name;
    }
    return image;
  }

  /** A line's image and whether it carries only {@code Keys}. */
  private static final class Line {
    final Map<String, JsonNode> item;
    final boolean keysOnly;

    Line(Map<String, JsonNode> item, boolean keysOnly) {
      this.item = item;
      this.keysOnly = keysOnly;
    }
  }

  private static final List<String> IMAGES = List.of("Item", "NewImage", "OldImage", "Keys");

  /**
   * The image of a line of an export or a change file, as {@code decode.with_image} takes it in
   * Spark SQL: the first of {@code Item}, {@code NewImage}, {@code OldImage} and {@code Keys}
   * that is there and not null; one given as a JSON string is that string's item, as Spark's
   * parser hands it over; of a field given twice, the last counts. A line that is not a JSON
   * object, or has none of them, fails with the plan's message. One parse of the line: the
   * envelope's other fields, and an image a found one outranks (an update's {@code OldImage}
   * after its {@code NewImage}), are skipped, not read; a line naming an image twice is read
   * again without skipping, since its last field may be null.
   */
  private static Line line(Plan p, String text) throws Failure {
    Object[] images = null;
    for (int pass = 0; images == null; pass++) images = images(p, text, pass == 0);
    for (int at = 0; at < images.length; at++) {
      Object image = images[at];
      if (image == null) continue;
      Map<String, JsonNode> item =
          image instanceof String ? attributes(p, (String) image) : ((Image) image).attributes(p);
      return new Line(item, at == images.length - 1);
    }
    throw new Failure(p.notAnItem);
  }

  private static boolean outranked(Object[] images, int at) {
    for (int k = 0; k < at; k++) if (images[k] != null) return true;
    return false;
  }

  /** The line's images by rank (null: not there); null when {@code skip} met an image twice. */
  private static Object[] images(Plan p, String text, boolean skip) throws Failure {
    Object[] images = new Object[IMAGES.size()];
    boolean[] named = new boolean[IMAGES.size()];
    try (JsonParser parser = Decode.JSON.createParser(text == null ? "" : text)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) throw new Failure(p.notAnItem);
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        int at = IMAGES.indexOf(parser.getCurrentName());
        JsonToken token = parser.nextToken();
        if (at >= 0 && named[at] && skip) return null;
        if (at >= 0) named[at] = true;
        boolean outranked = skip && outranked(images, at);
        if (at < 0 || token == JsonToken.VALUE_NULL || outranked) {
          parser.skipChildren();
          if (at >= 0 && !outranked) images[at] = null;
        } else if (token == JsonToken.VALUE_STRING) {
          images[at] = parser.getText();
        } else {
          images[at] = read(parser, token);
        }
      }
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) { // not JSON: no envelope
      throw new Failure(p.notAnItem);
    } catch (IOException e) { // a String has no I/O: never
      throw new UncheckedIOException(e);
    }
    return images;
  }

  private static JsonNode valueOf(Map<String, JsonNode> item, String name) {
    return item.get(name);
  }

  private static void decode(
      Plan p, Map<String, JsonNode> item, String given, boolean keysOnly, Object[] out)
      throws IOException, Failure {
    Section section = p.own;
    int at = p.keys.size();
    String entity = null;
    if (p.entities) {
      entity = p.given ? given : entity(p, item, keysOnly);
      section = entity == null ? null : p.sections.get(entity);
    }
    checkKeys(p, item, section, out);
    List<String> drift = new ArrayList<>();
    Set<String> inexact = new HashSet<>();
    Section typed = section != null && !section.attributes.isEmpty() ? section : null;
    if (!p.entities) {
      at = values(section, item, drift, inexact, out, at);
    } else {
      out[at++] = entity;
      for (Section s : p.structs) {
        if (s == typed) {
          Object[] fields = new Object[s.attributes.size()];
          values(s, item, drift, inexact, fields, 0);
          out[at++] = RowFactory.create(fields);
        } else {
          out[at++] = null;
        }
      }
    }
    if (typed != null && typed.strict && !drift.isEmpty()) {
      throw new Failure(p.sampleMisfit + ": " + String.join(", ", drift) + " in ");
    }
    out[at++] = drift.isEmpty() ? null : drift;
    Set<String> named = new HashSet<>();
    for (Attribute key : p.keys) named.add(key.name);
    if (typed != null) for (Attribute a : typed.attributes) named.add(a.name);
    out[at] = rest(item, named, inexact);
  }

  /** The final table of the item's entity, the unmatched table, or null for a record that
   * carries only Keys and no attribute to tell its entity by (an attribute rule). */
  private static String entity(Plan p, Map<String, JsonNode> item, boolean keysOnly) {
    String text = Value.text(valueOf(item, p.ruleAttribute), Value.S);
    if (p.by.equals("key")) {
      if (text != null) {
        int hash = text.indexOf('#');
        text = hash < 0 ? text : text.substring(0, hash);
      }
    } else if (keysOnly && text == null) {
      return null;
    }
    String found = text == null ? null : p.finals.get(text);
    return found == null ? p.unmatched : found;
  }

  private static void checkKeys(Plan p, Map<String, JsonNode> item, Section section, Object[] out)
      throws Failure {
    List<String> untyped = new ArrayList<>();
    for (Map.Entry<String, JsonNode> e : item.entrySet()) {
      if (Value.descriptor(e.getValue()) == Value.UNKNOWN) untyped.add(e.getKey());
    }
    if (!untyped.isEmpty()) {
      throw new Failure(p.unknownDescriptor + String.join(", ", untyped) + " of an item of ");
    }
    if (section != null) {
      List<String> unknown = new ArrayList<>();
      for (String name : item.keySet()) if (!section.known.contains(name)) unknown.add(name);
      if (!unknown.isEmpty()) throw new Failure(p.newAttributes + ": " + String.join(", ", unknown) + " in ");
    }
    for (int i = 0; i < p.keys.size(); i++) {
      Attribute key = p.keys.get(i);
      JsonNode value = valueOf(item, key.name);
      if (Value.absent(value)) throw new Failure(key.missing);
      Object decoded = Decode.typed(value, key.type, null, false, -1);
      if (decoded == null || (key.type.kind.equals("string") && Value.descriptor(value) != Value.S)) {
        throw new Failure(key.misfit);
      }
      out[i] = decoded;
    }
  }

  /** The section's attributes decoded into {@code out} from {@code at}; drifted and inexact
   * names collected. Returns the next position. */
  private static int values(Section section, Map<String, JsonNode> item, List<String> drift,
      Set<String> inexact, Object[] out, int at) {
    for (Attribute a : section.attributes) {
      JsonNode value = valueOf(item, a.name);
      Decode.Seen seen = section.strict ? a.seen : null;
      Object exact = null;
      Object decoded;
      if (a.exactFirst()) {
        exact = Decode.typed(value, a.type, seen, true, a.sets);
        decoded = exact != null ? exact : Decode.typed(value, a.type, seen, false, -1);
      } else {
        decoded = Decode.typed(value, a.type, seen, false, -1);
      }
      if (!Value.absent(value) && decoded == null) drift.add(a.name);
      if (value != null) {
        boolean givenBack;
        if (a.type.kind.equals("string")) givenBack = Value.descriptor(value) == Value.S;
        else givenBack = (a.exactFirst() ? exact : decoded) != null;
        if (!givenBack) inexact.add(a.name);
      }
      out[at++] = decoded;
    }
    return at;
  }

  /** The remainder: the item's attributes its columns cannot give back ({@code inexact}) and
   * those with no column ({@code named} lacks them), as DynamoDB JSON written as Spark writes
   * JSON (what the item's text is when Spark's parser gave it); null when none. */
  private static String rest(Map<String, JsonNode> item, Set<String> named, Set<String> inexact)
      throws IOException {
    StringBuilder rest = null;
    for (Map.Entry<String, JsonNode> e : item.entrySet()) {
      String name = e.getKey();
      if (named.contains(name) && !inexact.contains(name)) continue;
      rest = rest == null ? new StringBuilder("{") : rest.append(',');
      // Written as Spark's parser writes a value it keeps as text: UTF-8 bytes, so a character
      // beyond the BMP is escaped as its surrogate pair (the item's own text is written so).
      byte[] value = MAPPER.writeValueAsBytes(e.getValue());
      rest.append(Decode.key(name)).append(':').append(new String(value, StandardCharsets.UTF_8));
    }
    return rest == null ? null : rest.append('}').toString();
  }
}
