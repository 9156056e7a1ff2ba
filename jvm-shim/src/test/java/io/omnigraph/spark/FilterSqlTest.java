package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.LocalDate;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.sources.AlwaysTrue;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;
import org.junit.jupiter.api.Test;

/** Spark filters -> Lance SQL on the JVM read path: the Python source's translation (spec/filters.json). */
class FilterSqlTest {
  private static final JsonNode SPEC = Spec.load("filters.json");
  private static final Set<String> PUSHABLE = Set.of("system", "String", "Bool", "I32", "I64", "U32", "U64", "Date");

  /** The columns the driver hands the JVM source: the pushable ones, by kind. */
  private static Map<String, String> kinds() {
    Map<String, String> out = new HashMap<>();
    SPEC.get("columns").fields().forEachRemaining(e -> {
      String kind = e.getValue().get("kind").asText();
      if (PUSHABLE.contains(kind) && !e.getValue().path("list").asBoolean(false)) {
        out.put(e.getKey(), kind);
      }
    });
    return out;
  }

  private static Object value(JsonNode v) {
    if (v == null || v.isNull()) {
      return null;
    }
    Map.Entry<String, JsonNode> e = v.fields().next();
    JsonNode x = e.getValue();
    return switch (e.getKey()) {
      case "string" -> x.asText();
      case "int" -> x.asInt();
      case "long" -> x.asLong();
      case "bool" -> x.asBoolean();
      case "double" -> x.asDouble();
      case "date" -> java.sql.Date.valueOf(x.asText()); // Spark's default external type of a date
      default -> throw new IllegalArgumentException(e.getKey());
    };
  }

  static Filter filter(JsonNode f) {
    String c = f.path("column").asText(null);
    Object v = value(f.get("value"));
    return switch (f.get("op").asText()) {
      case "EqualTo" -> new EqualTo(c, v);
      case "EqualNullSafe" -> new EqualNullSafe(c, v);
      case "GreaterThan" -> new GreaterThan(c, v);
      case "GreaterThanOrEqual" -> new GreaterThanOrEqual(c, v);
      case "LessThan" -> new LessThan(c, v);
      case "LessThanOrEqual" -> new LessThanOrEqual(c, v);
      case "In" -> {
        Object[] values = new Object[f.get("values").size()];
        for (int i = 0; i < values.length; i++) {
          values[i] = value(f.get("values").get(i));
        }
        yield new In(c, values);
      }
      case "IsNull" -> new IsNull(c);
      case "IsNotNull" -> new IsNotNull(c);
      case "Not" -> new Not(filter(f.get("child")));
      case "And" -> new And(filter(f.get("left")), filter(f.get("right")));
      case "Or" -> new Or(filter(f.get("left")), filter(f.get("right")));
      case "StringStartsWith" -> new StringStartsWith(c, (String) v);
      case "StringEndsWith" -> new StringEndsWith(c, (String) v);
      case "StringContains" -> new StringContains(c, (String) v);
      case "AlwaysTrue" -> new AlwaysTrue();
      default -> throw new IllegalArgumentException(f.toString());
    };
  }

  @Test
  void everyGoldenFilterTranslatesAsThePythonSourceDoes() {
    Map<String, String> kinds = kinds();
    int n = 0;
    for (JsonNode c : SPEC.get("cases")) {
      JsonNode want = c.has("jvm_sql") ? c.get("jvm_sql") : c.get("sql");
      assertEquals(want.isNull() ? null : want.asText(), FilterSql.translate(filter(c.get("filter")), kinds),
          c.get("name").asText());
      n++;
    }
    assertEquals(SPEC.get("cases").size(), n);
  }

  @Test
  void datesOfBothExternalTypesWithinYearsOneTo9999() {
    Map<String, String> kinds = Map.of("day", "Date");
    assertEquals("(`day` < date '2024-02-29')", FilterSql.translate(new LessThan("day", LocalDate.of(2024, 2, 29)), kinds));
    assertEquals("(`day` = date '0001-01-01')", FilterSql.translate(new EqualTo("day", LocalDate.of(1, 1, 1)), kinds));
    assertNull(FilterSql.translate(new EqualTo("day", LocalDate.of(10000, 1, 1)), kinds));
    assertNull(FilterSql.translate(new EqualTo("day", LocalDate.of(0, 12, 31)), kinds));
    assertNull(FilterSql.translate(new EqualTo("day", "2024-02-29"), kinds), "a string is no date literal");
  }

  @Test
  void smallIntegerTypesRenderAndOthersStayWithSpark() {
    Map<String, String> kinds = Map.of("age", "I32", "f", "F64");
    assertEquals("(`age` = 7)", FilterSql.translate(new EqualTo("age", (short) 7), kinds));
    assertEquals("(`age` = -8)", FilterSql.translate(new EqualTo("age", (byte) -8), kinds));
    assertNull(FilterSql.translate(new EqualTo("age", 7.0), kinds));
    assertNull(FilterSql.translate(new EqualTo("age", new java.math.BigDecimal("7")), kinds));
    assertNull(FilterSql.translate(new EqualTo("f", 1.5), kinds), "a kind the driver never sends");
  }

  @Test
  void quotingAndLikeEscapes() {
    assertEquals("'it''s'", FilterSql.quote("it's"));
    assertEquals("''", FilterSql.quote(""));
    assertEquals("a\\\\b\\%c\\_d", FilterSql.escapeLike("a\\b%c_d"));
  }
}
