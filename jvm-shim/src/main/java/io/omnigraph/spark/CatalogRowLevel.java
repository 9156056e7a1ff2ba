package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.DeltaBatchWrite;
import org.apache.spark.sql.connector.write.DeltaWrite;
import org.apache.spark.sql.connector.write.DeltaWriteBuilder;
import org.apache.spark.sql.connector.write.DeltaWriter;
import org.apache.spark.sql.connector.write.DeltaWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.RowLevelOperation;
import org.apache.spark.sql.connector.write.SupportsDelta;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code UPDATE ... SET ... WHERE} and {@code MERGE INTO} on a catalog table ({@link
 * CatalogTable}): Spark's delta-based row-level operation, whose row id is the type's {@code id}
 * column (every node and edge table has one).
 *
 * <ul>
 *   <li>The scan is the provider's read of ONE manifest version of the branch, pinned when the
 *       operation is built (the planner's {@code row_level_pin}).
 *   <li>The tasks hand every updated and inserted row, whole, to the provider's JVM sink as a
 *       {@code writeMode=merge} write stages them, and collect the ids of the rows updated and
 *       deleted. An update that changes the row's {@code id}, or a node's {@code @key} (whose
 *       text is the id), is refused here: the task records it, stages nothing more, and the
 *       commit raises KEY_CHANGE.
 *   <li>The commit is the planner's ({@code commit} with {@code row_level}, {@code
 *       omnigraph_spark/spark/row_level.py}): ONE graph commit of the merge rows plus the delete
 *       of the collected ids, refused if the table moved past the scanned version.
 * </ul>
 */
final class CatalogRowLevel implements SupportsDelta {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(CatalogRowLevel.class);

  private final CatalogTable table;
  private final Command command;
  private final long version; // the manifest version the statement scans
  private final long tableVersion; // the type's table version in it

  CatalogRowLevel(CatalogTable table, Command command, JsonNode pin) {
    this.table = table;
    this.command = command;
    this.version = pin.get("version").asLong();
    this.tableVersion = pin.get("table_version").asLong();
  }

  @Override
  public Command command() {
    return command;
  }

  @Override
  public String description() {
    return command + " " + table.name() + " at version " + version;
  }

  /** The table's read at the pinned version (with the statement's own options, if any). */
  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    Map<String, String> pinned = new HashMap<>(options.asCaseSensitiveMap());
    pinned.put("version", Long.toString(version));
    return table.newScanBuilder(new CaseInsensitiveStringMap(pinned));
  }

  @Override
  public NamedReference[] rowId() {
    return new NamedReference[] {Expressions.column("id")};
  }

  @Override
  public boolean representUpdateAsDeleteAndInsert() {
    return false;
  }

  @Override
  public DeltaWriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return new DeltaWriteBuilder() {
      @Override
      public DeltaWrite build() {
        return new DeltaWrite() {
          @Override
          public String description() {
            return CatalogRowLevel.this.description();
          }

          @Override
          public DeltaBatchWrite toBatch() {
            return plan(info);
          }
        };
      }
    };
  }

  /** The planner's {@code writeMode=merge} write of the statement's rows, on the JVM sink. */
  private DeltaBatchWrite plan(LogicalWriteInfo info) {
    Map<String, String> options = table.writeOptions(info.options());
    options.put("writeMode", "merge");
    // a DELETE's rows carry no data columns: plan the sink for the type's (it stages nothing)
    StructType schema = info.schema().getFieldIndex("id").isDefined() ? info.schema() : table.readSchema();
    Rules rules = Rules.of(schema, table.properties());
    // a node's id is its @key's text, which the tasks check (Rules.change): the sink derives it
    // from the key, as it does for a DataFrame without an id column
    StructType planned = schema;
    if (rules.key >= 0) {
      planned = new StructType(java.util.Arrays.stream(schema.fields()).filter(f -> !"id".equals(f.name()))
          .toArray(org.apache.spark.sql.types.StructField[]::new));
    }
    ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
    request.put("op", "plan_write");
    request.set("options", LanceSnapshotSource.JSON.valueToTree(options));
    request.put("overwrite", false);
    request.put("schema", planned.json());
    PythonBridge[] held = new PythonBridge[1];
    JsonNode answer = PythonBridge.ask(request, b -> held[0] = b);
    if (answer.has("python")) {
      held[0].release();
      throw new PythonBridge.OmnigraphException(ErrorCodes.SQL_UNSUPPORTED, "SqlUnsupportedError: ["
          + ErrorCodes.SQL_UNSUPPORTED + "] " + command + " of " + table.name() + " needs the JVM sink, which cannot "
          + "stage this type: " + answer.get("python").asText() + "; write with writeMode=merge through "
          + "df.write.format('omnigraph') instead");
    }
    JsonNode jvm = answer.get("jvm");
    if (rules.key >= 0) { // the projection's ordinals are into the planned schema: into the row's
      for (JsonNode column : jvm.get("projection")) {
        int o = column.get("ordinal").asInt();
        if (o >= rules.id) {
          ((ObjectNode) column).put("ordinal", o + 1);
        }
      }
    }
    OmnigraphProvider.ProviderBatchWrite sink = OmnigraphProvider.sinkWrite(held[0], jvm, schema);
    return new Batch(held[0], sink, rules, SparkSession.active());
  }

  /** Where a task finds a row's identity: {@code id}, and a node's {@code @key} with how its text renders. */
  static final class Rules implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final int id;
    final int key; // -1: no @key, or one whose text the JVM does not render (the sink's KEY_ID_MISMATCH checks it)
    final String keyName;
    final String keyKind;
    final DataType[] types; // the row's columns

    Rules(int id, int key, String keyName, String keyKind, DataType[] types) {
      this.id = id;
      this.key = key;
      this.keyName = keyName;
      this.keyKind = keyKind;
      this.types = types;
    }

    /** {@code row} with a null id (Spark's row-level rows may not be updated in place). */
    InternalRow withoutId(InternalRow row) {
      Object[] values = new Object[types.length];
      for (int i = 0; i < types.length; i++) {
        values[i] = i == id || row.isNullAt(i) ? null : row.get(i, types[i]);
      }
      return new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(values);
    }

    static Rules of(StructType schema, Map<String, String> properties) {
      int id = schema.fieldIndex("id");
      DataType[] types = java.util.Arrays.stream(schema.fields()).map(f -> f.dataType()).toArray(DataType[]::new);
      String keyName = "node".equals(properties.get("omnigraph.kind")) ? properties.get("omnigraph.key") : null;
      if (keyName == null || !java.util.Arrays.asList(schema.fieldNames()).contains(keyName)) {
        return new Rules(id, -1, null, null, types);
      }
      int key = schema.fieldIndex(keyName);
      DataType t = schema.fields()[key].dataType();
      String kind = t instanceof StringType ? "string" : t instanceof LongType ? "long" : t instanceof IntegerType
          ? "int" : t instanceof ShortType ? "short" : t instanceof ByteType ? "byte" : t instanceof BooleanType
          ? "bool" : null;
      return kind == null ? new Rules(id, -1, null, null, types) : new Rules(id, key, keyName, kind, types);
    }

    /** The id a node's @key derives (its text, as the planner casts it), or null for a null key. */
    String keyText(InternalRow row) {
      if (row.isNullAt(key)) {
        return null;
      }
      switch (keyKind) {
        case "string": return row.getUTF8String(key).toString();
        case "long": return Long.toString(row.getLong(key));
        case "int": return Integer.toString(row.getInt(key));
        case "short": return Short.toString(row.getShort(key));
        case "byte": return Byte.toString(row.getByte(key));
        default: return Boolean.toString(row.getBoolean(key));
      }
    }

    /** Null if {@code row} keeps the identity of the row {@code rowId} names; else {column, old, new}. */
    String[] change(String rowId, InternalRow row) {
      String now = row.isNullAt(id) ? null : row.getUTF8String(id).toString();
      if (!rowId.equals(now)) {
        return new String[] {"id", rowId, now};
      }
      if (key >= 0) {
        String text = keyText(row);
        if (!rowId.equals(text)) {
          return new String[] {keyName, rowId, text};
        }
      }
      return null;
    }
  }

  /** One task's outcome: the sink's message, the ids it updated and deleted, a refused row. */
  static final class Message implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final WriterCommitMessage sink;
    final ArrayList<String> updated;
    final ArrayList<String> deleted;
    final String[] refused; // {column, id, value}; null: none
    final long rows; // handed to the sink

    Message(WriterCommitMessage sink, ArrayList<String> updated, ArrayList<String> deleted, String[] refused,
        long rows) {
      this.sink = sink;
      this.updated = updated;
      this.deleted = deleted;
      this.refused = refused;
      this.rows = rows;
    }
  }

  /** The tasks: each wraps one of the sink's writers. */
  static final class Factory implements DeltaWriterFactory {
    private static final long serialVersionUID = 1L;
    private final DataWriterFactory sink;
    private final Rules rules;

    Factory(DataWriterFactory sink, Rules rules) {
      this.sink = sink;
      this.rules = rules;
    }

    @Override
    public DeltaWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new Writer(sink.createWriter(partitionId, taskId), rules);
    }
  }

  /** One task: updated and inserted rows to the sink, ids collected, the first identity change recorded. */
  static final class Writer implements DeltaWriter<InternalRow> {
    private final DataWriter<InternalRow> sink;
    private final Rules rules;
    private final ArrayList<String> updated = new ArrayList<>();
    private final ArrayList<String> deleted = new ArrayList<>();
    private String[] refused;
    private long rows;

    Writer(DataWriter<InternalRow> sink, Rules rules) {
      this.sink = sink;
      this.rules = rules;
    }

    @Override
    public void delete(InternalRow metadata, InternalRow id) {
      deleted.add(id.getUTF8String(0).toString());
    }

    @Override
    public void update(InternalRow metadata, InternalRow id, InternalRow row) throws IOException {
      if (refused != null) {
        return; // the statement fails at the commit: staging more is wasted work
      }
      String rowId = id.getUTF8String(0).toString();
      String[] change = rules.change(rowId, row);
      if (change != null) {
        refused = change;
        return;
      }
      updated.add(rowId);
      sink.write(row);
      rows++;
    }

    /** An inserted row; an id left out (the table's default, '') is the sink's to derive or mint. */
    @Override
    public void insert(InternalRow row) throws IOException {
      if (refused == null) {
        if (!row.isNullAt(rules.id) && row.getUTF8String(rules.id).numBytes() == 0) {
          row = rules.withoutId(row);
        }
        sink.write(row);
        rows++;
      }
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      return new Message(sink.commit(), updated, deleted, refused, rows);
    }

    @Override
    public void abort() throws IOException {
      sink.abort();
    }

    @Override
    public void close() throws IOException {
      sink.close();
    }
  }

  /** The statement's write: the sink's tasks, then ONE graph commit by the planner. */
  final class Batch extends OmnigraphProvider.BridgedWrite implements DeltaBatchWrite {
    private final OmnigraphProvider.ProviderBatchWrite sink;
    private final Rules rules;

    Batch(PythonBridge bridge, OmnigraphProvider.ProviderBatchWrite sink, Rules rules, SparkSession session) {
      super(bridge, session);
      this.sink = sink;
      this.rules = rules;
    }

    @Override
    public DeltaWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new Factory(sink.createBatchWriterFactory(info), rules);
    }

    /** A statement that matched no row commits nothing (the planner drops what it planned). */
    @Override
    public void commit(WriterCommitMessage[] messages) {
      long touched = 0;
      for (WriterCommitMessage m : messages) {
        if (m instanceof Message) {
          Message t = (Message) m;
          touched += t.rows + t.deleted.size() + (t.refused == null ? 0 : 1);
        }
      }
      if (touched == 0) {
        LOG.info("omnigraph {}: no row matched; nothing committed", CatalogRowLevel.this.description());
        abort(messages);
        return;
      }
      super.commit(messages);
    }

    @Override
    ObjectNode commitRequest(WriterCommitMessage[] messages) {
      WriterCommitMessage[] staged = new WriterCommitMessage[messages.length];
      ObjectNode rowLevel = LanceSnapshotSource.JSON.createObjectNode();
      rowLevel.put("command", command.toString());
      rowLevel.put("version", version);
      rowLevel.put("table_version", tableVersion);
      ArrayNode updated = rowLevel.putArray("updated");
      ArrayNode deleted = rowLevel.putArray("deleted");
      for (int i = 0; i < messages.length; i++) {
        Message m = (Message) messages[i];
        staged[i] = m == null ? null : m.sink;
        if (m == null) {
          continue;
        }
        m.updated.forEach(updated::add);
        m.deleted.forEach(deleted::add);
        if (m.refused != null && !rowLevel.has("refused")) {
          ObjectNode r = rowLevel.putObject("refused");
          r.put("column", m.refused[0]);
          r.put("id", m.refused[1]);
          r.put("old", m.refused[1]);
          r.put("value", m.refused[2]);
        }
      }
      ObjectNode request = sink.commitRequest(staged);
      request.set("row_level", rowLevel);
      return request;
    }
  }
}
