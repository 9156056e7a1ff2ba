package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

/**
 * The tasks of an UPDATE / MERGE ({@link CatalogRowLevel.Writer}): what reaches the sink, what
 * is collected, and the identity check ({@link CatalogRowLevel.Rules}) that refuses a changed
 * {@code id} or node {@code @key} (the driver raises KEY_CHANGE from it; tests/spark/test_sql.py
 * runs the statements end to end).
 */
class CatalogRowLevelTest {
  private static final StructType PERSON = new StructType().add("id", DataTypes.StringType, false)
      .add("age", DataTypes.IntegerType).add("name", DataTypes.StringType, false);
  private static final Map<String, String> NODE = Map.of("omnigraph.kind", "node", "omnigraph.key", "name");

  private static InternalRow row(Object... values) {
    Object[] out = new Object[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = values[i] instanceof String ? UTF8String.fromString((String) values[i]) : values[i];
    }
    return new GenericInternalRow(out);
  }

  /** A sink that keeps the rows it is handed (copied: a task's rows may be reused). */
  static final class Sink implements DataWriter<InternalRow> {
    final List<InternalRow> rows = new ArrayList<>();

    @Override
    public void write(InternalRow r) {
      rows.add(r.copy());
    }

    @Override
    public WriterCommitMessage commit() {
      return new WriterCommitMessage() {};
    }

    @Override
    public void abort() {}

    @Override
    public void close() {}
  }

  @Test
  void updatesAndInsertsReachTheSinkAndIdsAreCollected() throws Exception {
    Sink sink = new Sink();
    CatalogRowLevel.Writer w = new CatalogRowLevel.Writer(sink, CatalogRowLevel.Rules.of(PERSON, NODE));
    w.update(null, row("bob"), row("bob", 41, "bob"));
    w.insert(row("", 20, "dora")); // an id left out: the table's default '' becomes null for the sink
    w.delete(null, row("carol"));
    CatalogRowLevel.Message m = (CatalogRowLevel.Message) w.commit();
    assertEquals(List.of("bob"), m.updated);
    assertEquals(List.of("carol"), m.deleted);
    assertNull(m.refused);
    assertEquals(2, m.rows);
    assertEquals(2, sink.rows.size());
    assertTrue(sink.rows.get(1).isNullAt(0));
    assertEquals("dora", sink.rows.get(1).getUTF8String(2).toString());
  }

  @Test
  void aChangedIdOrKeyIsRefusedAndStopsStaging() throws Exception {
    Sink sink = new Sink();
    CatalogRowLevel.Writer w = new CatalogRowLevel.Writer(sink, CatalogRowLevel.Rules.of(PERSON, NODE));
    w.update(null, row("bob"), row("bob", 41, "bobby"));
    w.update(null, row("alice"), row("alice", 31, "alice"));
    w.insert(row("", 1, "erin"));
    CatalogRowLevel.Message m = (CatalogRowLevel.Message) w.commit();
    assertArrayEquals(new String[] {"name", "bob", "bobby"}, m.refused);
    assertEquals(0, sink.rows.size());
    assertEquals(List.of(), m.updated);

    CatalogRowLevel.Rules rules = CatalogRowLevel.Rules.of(PERSON, NODE);
    assertArrayEquals(new String[] {"id", "bob", "zed"}, rules.change("bob", row("zed", 1, "bob")));
    assertArrayEquals(new String[] {"id", "bob", null}, rules.change("bob", row(null, 1, "bob")));
    assertNull(rules.change("bob", row("bob", 1, "bob")));
  }

  @Test
  void keyTextIsTheIdThePlannerDerives() {
    StructType ints = new StructType().add("id", DataTypes.StringType, false).add("n", DataTypes.LongType, false);
    CatalogRowLevel.Rules rules = CatalogRowLevel.Rules.of(ints, Map.of("omnigraph.kind", "node", "omnigraph.key", "n"));
    assertEquals("-42", rules.keyText(row("-42", -42L)));
    assertNull(rules.change("-42", row("-42", -42L)));
    StructType bools = new StructType().add("id", DataTypes.StringType, false).add("b", DataTypes.BooleanType, false);
    assertEquals("true", CatalogRowLevel.Rules.of(bools, Map.of("omnigraph.kind", "node", "omnigraph.key", "b"))
        .keyText(row("true", true)));
  }

  @Test
  void edgesAndKeylessNodesCheckTheIdOnly() {
    StructType knows = new StructType().add("id", DataTypes.StringType, false).add("src", DataTypes.StringType, false)
        .add("dst", DataTypes.StringType, false);
    CatalogRowLevel.Rules rules = CatalogRowLevel.Rules.of(knows, Map.of("omnigraph.kind", "edge"));
    assertEquals(-1, rules.key);
    assertNull(rules.change("e1", row("e1", "a", "c"))); // src/dst: compared on the driver (row_level.py)
    assertArrayEquals(new String[] {"id", "e1", "e2"}, rules.change("e1", row("e2", "a", "b")));
  }
}
