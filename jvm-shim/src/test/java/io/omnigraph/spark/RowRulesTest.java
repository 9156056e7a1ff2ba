package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.omnigraph.spark.LanceFragmentSink.WriteSpec;
import io.omnigraph.spark.RowRules.RowRuleException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The JVM write path's per-row rules: the Python path's errors word for word (spec/row_rules.json). */
class RowRulesTest {
  private static final JsonNode SPEC = Spec.load("row_rules.json");
  private final BufferAllocator allocator = new RootAllocator();

  @AfterEach
  void close() {
    allocator.close(); // fails a test that leaks Arrow memory
  }

  /** The write's spec as the Python planner sends it: one {@code spec} option of JSON strings. */
  static WriteSpec spec(String label, String typeName, String where, ArrayNode rules, String mintColumn) {
    ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
    o.put("datasetUri", "/graph/nodes/x.lance");
    o.put("tableKey", "node:" + typeName);
    o.put("label", label);
    o.put("typeName", typeName);
    o.put("where", where);
    o.put("arrowSchema", "");
    o.put("dataStorageVersion", "2.2");
    o.put("journal", "/graph/_staging/load");
    o.put("handoff", "/graph/_staging/load/handoff.json");
    o.put("rules", rules.toString());
    if (mintColumn != null) {
      o.put("mintColumn", mintColumn);
    }
    Map<String, String> options = new HashMap<>();
    options.put("spec", o.toString());
    return WriteSpec.parse(options);
  }

  @Test
  void everyGoldenCaseRaisesThePythonPathsError() {
    for (JsonNode c : SPEC.get("cases")) {
      String name = c.get("name").asText();
      JsonNode rule = c.get("rule");
      String column = rule.get("column").asText();
      ArrayNode rules = LanceSnapshotSource.JSON.createArrayNode();
      rules.add(rule);
      WriteSpec spec = spec(c.get("label").asText(), c.get("typeName").asText(), c.get("where").asText(), rules, null);
      RowRules rr = new RowRules(spec, c.get("where").asText());
      FieldVector v = Spec.vector(column, c.get("values"), allocator);
      try (VectorSchemaRoot root = VectorSchemaRoot.of(v)) {
        root.setRowCount(v.getValueCount());
        JsonNode want = c.get("error");
        long offset = c.get("rowOffset").asLong();
        if (want.isNull()) {
          assertSame(root, rr.apply(root, offset, allocator), name);
          continue;
        }
        RowRuleException e = assertThrows(RowRuleException.class, () -> rr.apply(root, offset, allocator), name);
        assertEquals(want.get("code").asText(), e.code, name);
        assertEquals(want.get("message").asText(), e.getMessage(), name);
        ObjectNode json = e.toJson();
        assertEquals(want.get("code").asText(), json.get("code").asText(), name);
        assertEquals(want.get("message").asText(), json.get("message").asText(), name);
        JsonNode row = json.get("rows").get(0);
        assertEquals(c.get("label").asText(), row.get("table").asText(), name);
        assertEquals(column, row.get("column").asText(), name);
        assertEquals(want.get("row").asLong(), row.get("row").asLong(), name);
        assertEquals(want.get("value"), row.get("value"), name);
      }
    }
  }

  @Test
  void pythonReprOfStrings() {
    assertEquals("'abc'", RowRules.pythonRepr("abc"));
    assertEquals("\"it's\"", RowRules.pythonRepr("it's"));
    assertEquals("'say \"hi\"'", RowRules.pythonRepr("say \"hi\""));
    assertEquals("'it\\'s \"x\"'", RowRules.pythonRepr("it's \"x\""));
    assertEquals("'a\\\\b\\n\\r\\t\\x00\\x7f'", RowRules.pythonRepr("a\\b\n\r\t\u0000\u007f"));
    assertEquals("'lóud ☃ 😀'", RowRules.pythonRepr("lóud ☃ 😀"));
  }

  @Test
  void aRuleExceptionWithoutARowSaysSo() {
    ObjectNode json = new RowRuleException("DATA_INVALID", "bad input").toJson();
    assertEquals("[DATA_INVALID] bad input", json.get("message").asText());
    assertTrue(json.get("rows").get(0).get("row").isNull());
    assertTrue(json.get("rows").get(0).get("value").isNull());
  }

  @Test
  void nullIdsGetFreshUlidsAndGivenIdsStay() {
    WriteSpec spec = spec("node Item", "Item", "Item partition 0", LanceSnapshotSource.JSON.createArrayNode(), "id");
    RowRules rr = new RowRules(spec, "Item partition 0");
    long[] hi = new long[1];
    long[] lo = new long[1];

    String[] given = {"given-1", null, "a-much-longer-given-id-of-more-than-32-bytes", null, null};
    try (VectorSchemaRoot root = VectorSchemaRoot.of(Spec.varchar("id", Arrays.asList(given), allocator))) {
      root.setRowCount(given.length);
      try (VectorSchemaRoot out = rr.apply(root, 0, allocator)) {
        assertNotSame(root, out);
        VarCharVector ids = (VarCharVector) out.getVector("id");
        assertEquals(0, ids.getNullCount());
        for (int i = 0; i < given.length; i++) {
          String id = new String(ids.get(i), StandardCharsets.UTF_8);
          if (given[i] != null) {
            assertEquals(given[i], id);
          } else {
            assertTrue(Ulids.bits(ids.get(i), 0, id.length(), hi, lo, 0), id);
          }
        }
      }
    }
    assertEquals(2, rr.givenIds());

    int n = 3000; // every id missing: minted a block at a time, across blocks and validity bytes
    String[] none = new String[n];
    try (VectorSchemaRoot root = VectorSchemaRoot.of(Spec.varchar("id", Arrays.asList(none), allocator))) {
      root.setRowCount(n);
      try (VectorSchemaRoot out = rr.apply(root, 0, allocator)) {
        VarCharVector ids = (VarCharVector) out.getVector("id");
        assertEquals(n, ids.getValueCount());
        assertEquals(0, ids.getNullCount());
        String before = "";
        for (int i = 0; i < n; i++) {
          byte[] b = ids.get(i);
          if (!Ulids.bits(b, 0, b.length, hi, lo, 0)) {
            fail("row " + i + " is no minted ULID: " + new String(b, StandardCharsets.UTF_8));
          }
          String id = new String(b, StandardCharsets.US_ASCII);
          assertTrue(id.compareTo(before) > 0, "one task's ids increase");
          before = id;
        }
      }
    }
    assertEquals(2, rr.givenIds());

    String[] all = {"x", "y"};
    try (VectorSchemaRoot root = VectorSchemaRoot.of(Spec.varchar("id", Arrays.asList(all), allocator))) {
      root.setRowCount(2);
      assertSame(root, rr.apply(root, 0, allocator), "nothing to mint: the batch as it is");
    }
    assertEquals(4, rr.givenIds());
  }

  @Test
  void aSpecWithoutARequiredFieldNamesIt() {
    Map<String, String> options = new HashMap<>();
    options.put("spec", "{\"datasetUri\": \"/g/x.lance\"}");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> WriteSpec.parse(options));
    assertEquals("option 'tableKey' is required", e.getMessage());
    options.put("spec", "{not json");
    assertThrows(java.io.UncheckedIOException.class, () -> WriteSpec.parse(options));
  }

  @Test
  void theSpecCarriesTheRulesInOrder() {
    ArrayNode rules = LanceSnapshotSource.JSON.createArrayNode();
    rules.addObject().put("column", "qty").put("notNull", "I64");
    ObjectNode e = rules.addObject().put("column", "kind");
    e.putArray("enum").add("alpha").add("beta");
    e.putNull("notNull");
    WriteSpec spec = spec("node Item", "Item", "Item partition 0", rules, null);
    assertEquals(2, spec.rules.size());
    assertEquals("qty", spec.rules.get(0).column);
    assertEquals("I64", spec.rules.get(0).notNull);
    assertNull(spec.rules.get(0).allowed);
    assertEquals(Arrays.asList("alpha", "beta"), spec.rules.get(1).allowed);
    assertNull(spec.rules.get(1).notNull);
    assertNull(spec.mintColumn);
    assertEquals(65536, spec.batchRows);
  }
}
