package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.LocalDate;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.StringStartsWith;
import org.junit.jupiter.api.Test;

/**
 * A DELETE's filters as the planner reads them: {@link CatalogTable#filterJson} writes each Spark
 * filter of spec/filters.json back in the spec's own form, which the planner's
 * {@code catalog.filter_from_json} turns into the filters its rules translate (tests/spark/test_sql.py
 * checks that half against the same cases).
 */
class CatalogTableTest {
  private static final JsonNode SPEC = Spec.load("filters.json");

  @Test
  void everyGoldenFilterSerialisesInTheSpecsForm() {
    int n = 0;
    for (JsonNode c : SPEC.get("cases")) {
      JsonNode f = c.get("filter");
      assertEquals(f, CatalogTable.filterJson(FilterSqlTest.filter(f)), c.get("name").asText());
      n++;
    }
    assertEquals(SPEC.get("cases").size(), n);
  }

  @Test
  void literalsTheRulesCannotRenderAreMarkedSo() {
    assertEquals("{\"op\":\"EqualTo\",\"column\":\"day\",\"value\":{\"date\":\"2024-02-29\"}}",
        CatalogTable.filterJson(new EqualTo("day", LocalDate.of(2024, 2, 29))).toString());
    assertEquals("{\"op\":\"EqualTo\",\"column\":\"x\",\"value\":{\"other\":\"7.5\"}}",
        CatalogTable.filterJson(new EqualTo("x", new java.math.BigDecimal("7.5"))).toString());
    assertEquals("{\"op\":\"StringStartsWith\",\"column\":\"name\",\"value\":{\"string\":\"a%\"}}",
        CatalogTable.filterJson(new StringStartsWith("name", "a%")).toString());
  }
}
