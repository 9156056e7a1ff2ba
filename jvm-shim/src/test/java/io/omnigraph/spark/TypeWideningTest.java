package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import java.time.LocalDate;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/**
 * The JVM write path's conversions ({@link ProjectedRow}) are spec/type_widening.json's "jvm"
 * list, no more: the same pairs, the sink's types, the golden values; tests/test_spec.py checks
 * the Python planners and the Python path against the same file.
 */
class TypeWideningTest {
  private static final JsonNode SPEC = Spec.load("type_widening.json");
  /** The conversions the planner names (besides "same", the identity, and "null", the planner's null column). */
  private static final String[] CONVERSIONS = {"int", "long", "float", "double", "micros_date", "micros_ts"};

  private static ProjectedRow.Mapping mapping(String from, String to, DataType input) {
    ArrayNode columns = LanceSnapshotSource.JSON.createArrayNode();
    ObjectNode c = columns.addObject();
    c.put("column", "p");
    c.put("ordinal", 0);
    c.put("from", from);
    c.put("to", to);
    return new ProjectedRow.Mapping(columns, new StructType().add("p", input, true));
  }

  private static String from(String input) {
    return SPEC.get("inputs").get(input).get("jvm").asText();
  }

  private static JsonNode jvm(String input, String kind) {
    for (JsonNode j : SPEC.get("jvm")) {
      if (j.get("input").asText().equals(input) && j.get("kind").asText().equals(kind)) {
        return j;
      }
    }
    return null;
  }

  @Test
  void theProjectionMakesExactlyTheSpecsConversions() {
    // each name the projection reads an input as, with a Spark type of that name
    Map<String, DataType> froms = new LinkedHashMap<>();
    SPEC.get("inputs").fields().forEachRemaining(e -> froms.putIfAbsent(from(e.getKey()), DataType.fromDDL(e.getKey())));
    froms.put("array", DataTypes.createArrayType(DataTypes.IntegerType));
    froms.put("null", DataTypes.NullType);
    int accepted = 0;
    for (Map.Entry<String, DataType> f : froms.entrySet()) {
      for (String to : CONVERSIONS) {
        boolean want = false;
        for (JsonNode j : SPEC.get("jvm")) {
          want |= from(j.get("input").asText()).equals(f.getKey()) && j.get("to").asText().equals(to);
        }
        String pair = f.getKey() + " -> " + to;
        if (want) {
          mapping(f.getKey(), to, f.getValue());
          accepted++;
        } else {
          assertThrows(IllegalArgumentException.class, () -> mapping(f.getKey(), to, f.getValue()), pair);
        }
      }
    }
    assertTrue(accepted > 10, "the spec's jvm list was read");
  }

  @Test
  void theSinksRowHoldsTheKindsSinkType() {
    for (JsonNode j : SPEC.get("jvm")) {
      String input = j.get("input").asText();
      String kind = j.get("kind").asText();
      DataType sink = DataType.fromDDL(SPEC.get("kinds").get(kind).get("jvm_sink").asText());
      DataType in = DataType.fromDDL(input);
      assertEquals(sink, mapping(from(input), j.get("to").asText(), in).output.fields()[0].dataType(), input + " -> " + kind);
      if (in.equals(sink)) { // the planner sends the identity for these: the same row type
        assertEquals(sink, mapping(from(input), "same", in).output.fields()[0].dataType(), input + " -> " + kind);
      }
    }
  }

  @Test
  void theNullColumnIsOnlyTheNullInputs() {
    mapping("null", "null", DataTypes.NullType);
    assertThrows(IllegalArgumentException.class, () -> mapping("int", "null", DataTypes.IntegerType));
  }

  @Test
  void goldenValuesConvertAsThePythonPath() {
    int checked = 0;
    for (JsonNode c : SPEC.get("cases")) {
      String input = c.get("input").asText();
      String kind = c.get("kind").asText();
      JsonNode j = jvm(input, kind);
      if (j == null) {
        continue; // the Python path's alone
      }
      String name = input + " -> " + kind + " " + c.get("in");
      String to = j.get("to").asText();
      String sink = SPEC.get("kinds").get(kind).get("jvm_sink").asText();
      ProjectedRow row = new ProjectedRow(mapping(from(input), to, DataType.fromDDL(input)));
      JsonNode want = c.has("jvm_row") ? c.get("jvm_row") : c.get("out");
      boolean micros = to.startsWith("micros");
      assertEquals(micros, c.has("jvm_row"), name + ": a DateTime's row holds microseconds");
      int bad = c.has("error") ? c.get("error").get("row").asInt() : -1;
      JsonNode values = c.get("in");
      for (int i = 0; i < values.size(); i++) {
        InternalRow got = row.of(new GenericInternalRow(new Object[] {internal(input, values.get(i))}));
        if (want.get(i).isNull()) {
          assertTrue(got.isNullAt(0), name);
          continue;
        }
        assertFalse(got.isNullAt(0), name);
        switch (sink) {
          case "int": assertEquals(want.get(i).asInt(), got.getInt(0), name); break;
          case "bigint": assertEquals(want.get(i).asLong(), got.getLong(0), name); break;
          case "float": assertEquals((float) want.get(i).asDouble(), got.getFloat(0), name); break;
          case "double": assertEquals(want.get(i).asDouble(), got.getDouble(0), name); break;
          default: fail(name + ": no golden values for a sink of " + sink);
        }
        if (micros) { // the sink stores milliseconds, or refuses the first finer value (FragmentStager)
          long us = got.getLong(0);
          assertEquals(i != bad, ProjectedRow.wholeMillis(us), name + " row " + i);
          if (bad < 0) {
            assertEquals(c.get("out").get(i).asLong(), ProjectedRow.millis(us), name);
          }
        }
        checked++;
      }
      if (bad >= 0) {
        assertTrue(micros, name + ": only the sink's DateTime check refuses a value in the JVM");
      }
    }
    assertTrue(checked > 20, "golden values were checked");
  }

  /** A JSON value of the spec as Spark's internal value of a column of type {@code input}. */
  private static Object internal(String input, JsonNode v) {
    if (v.isNull()) {
      return null;
    }
    switch (input) {
      case "tinyint": return (byte) v.asInt();
      case "smallint": return (short) v.asInt();
      case "int": return v.asInt();
      case "bigint": return v.asLong();
      case "float": return (float) v.asDouble();
      case "double": return v.asDouble();
      case "boolean": return v.asBoolean();
      case "string": return UTF8String.fromString(v.asText());
      case "date": return (int) LocalDate.parse(v.asText()).toEpochDay();
      case "timestamp": {
        Instant at = Instant.parse(v.asText());
        return Math.addExact(Math.multiplyExact(at.getEpochSecond(), 1_000_000L), at.getNano() / 1000L);
      }
      default: throw new IllegalArgumentException("no golden input of type " + input);
    }
  }
}
