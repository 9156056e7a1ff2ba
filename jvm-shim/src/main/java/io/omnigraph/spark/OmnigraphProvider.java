package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("omnigraph")} on the JVM paths: the provider Spark resolves the short name to
 * when the shim jar is on the class path (a JVM short name is matched before a Python data
 * source's). A shell around two things that exist already:
 *
 * <ul>
 *   <li>the planning and the commit, in this package's Python code on the driver
 *       ({@link PythonBridge}, {@code omnigraph_spark.spark.bridge}): the same option parsing,
 *       snapshot resolution, column checks, validation and single graph commit as the Python
 *       source and {@code write_table};
 *   <li>the JVM scan ({@link LanceSnapshotSource}) and the JVM staging sink
 *       ({@link LanceFragmentSink}), with no Python worker between Spark and Lance.
 * </ul>
 *
 * <p>Whatever the JVM paths do not cover (columns needing the Python reader's conversions,
 * {@code @range}/{@code @check}, quarantine, deletes, streams, a user-given read schema, option
 * {@code engine=python}) goes to the Python source itself, through Spark's own
 * {@link PythonDataSourceV2} under the same name: the session's Python data source registry
 * still holds {@code omnigraph}. So the short name stays complete with the jar on the class path.
 * The views of the planner's checks ({@link SparkWork}: a read with a given schema and the
 * reserved option {@code __omnigraph_scan}) go there too.
 */
public final class OmnigraphProvider implements TableProvider, DataSourceRegister {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(OmnigraphProvider.class);

  static final String NAME = "omnigraph";

  private JsonNode readPlan; // the JVM scan inferSchema planned (null: the Python source reads)
  private CaseInsensitiveStringMap readOptions; // until the first query's scan planned again
  private boolean inferred; // inferSchema ran: readPlan is its answer (else a stored table's schema came with getTable)
  private PythonDataSourceV2 python;

  @Override
  public String shortName() {
    return NAME;
  }

  /** The Python source under the same name (Spark's own wrapper of a registered Python data source). */
  PythonDataSourceV2 python() {
    if (python == null) {
      python = new PythonDataSourceV2();
      python.setShortName(NAME);
    }
    return python;
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  /**
   * Reads: plan in Python; the JVM scan's schema, or the Python source's when it must read. A
   * read of the branch head resolves the head again when the first query plans its scan
   * ({@link OmnigraphTable#newScanBuilder}), as the Python source's reader does at that point.
   */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    inferred = true;
    if (options.containsKey(SparkWork.SCAN_OPTION)) { // a check's view: the Python source reads it
      return python().inferSchema(options);
    }
    JsonNode answer = PythonBridge.ask(planReadRequest(options), null);
    if (answer.has("jvm")) {
      readPlan = answer.get("jvm");
      readOptions = options;
      return (StructType) DataType.fromJson(readPlan.get("schema").asText());
    }
    LOG.info("omnigraph read through the Python source: {}", answer.get("python").asText());
    return python().inferSchema(options);
  }

  private static ObjectNode planReadRequest(CaseInsensitiveStringMap options) {
    ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
    request.put("op", "plan_read");
    request.set("options", LanceSnapshotSource.JSON.valueToTree(options.asCaseSensitiveMap()));
    request.put("parallelism", defaultParallelism());
    return request;
  }

  /** The plan of the first query's scan: a head read resolves the head again, once. */
  private synchronized JsonNode firstScanPlan() {
    if (readOptions == null || !readPlan.path("head").asBoolean(false)) {
      return readPlan;
    }
    JsonNode answer = PythonBridge.ask(planReadRequest(readOptions), null);
    readOptions = null;
    return answer.has("jvm") ? answer.get("jvm") : null;
  }

  private static int defaultParallelism() {
    try {
      return SparkSession.active().sparkContext().defaultParallelism();
    } catch (RuntimeException e) {
      return Runtime.getRuntime().availableProcessors();
    }
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new OmnigraphTable(schema, partitioning, properties);
  }

  /**
   * One read or write of {@code format("omnigraph")}, or a table of Spark's session catalog
   * created {@code USING omnigraph}: Spark then gives the table's stored options (with the
   * session catalog's own keys, which the option parser drops) as {@code properties} and a
   * statement's options (none for SQL) to the scan and the write, so both get the two merged.
   */
  final class OmnigraphTable implements SupportsRead, SupportsWrite {
    private final StructType schema;
    private final Transform[] partitioning;
    private final Map<String, String> properties;
    private Table pythonTable;

    OmnigraphTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
      this.schema = schema;
      this.partitioning = partitioning;
      this.properties = properties;
    }

    /** The table's properties with a scan's or write's options over them (keys case-insensitive). */
    private CaseInsensitiveStringMap withProperties(CaseInsensitiveStringMap given) {
      if (properties == null || properties.isEmpty()) {
        return given;
      }
      Map<String, String> out = new HashMap<>();
      properties.forEach((k, v) -> out.put(k.toLowerCase(java.util.Locale.ROOT), v));
      given.asCaseSensitiveMap().forEach((k, v) -> out.put(k.toLowerCase(java.util.Locale.ROOT), v));
      return new CaseInsensitiveStringMap(out);
    }

    /** A table of Spark's session catalog (created USING omnigraph): its schema came from the catalog. */
    private boolean storedTable() {
      return properties != null && NAME.equalsIgnoreCase(properties.get("provider"));
    }

    private Table pythonTable() {
      if (pythonTable == null) {
        pythonTable = python().getTable(schema, partitioning, properties);
      }
      return pythonTable;
    }

    @Override
    public String name() {
      return NAME;
    }

    @Override
    public StructType schema() {
      return schema;
    }

    /**
     * A session catalog table also takes {@code ACCEPT_ANY_SCHEMA}: an {@code INSERT}'s columns
     * are matched by name, as the catalog's ({@link CatalogTable}) and the DataFrame API's are,
     * so it may leave out {@code id}. A temporary view {@code USING omnigraph} keeps Spark's
     * checks against its schema (by position), as without the jar, where the Python source's
     * table has the same capabilities.
     */
    @Override
    public Set<TableCapability> capabilities() {
      Set<TableCapability> all = EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
          TableCapability.TRUNCATE);
      if (storedTable()) {
        all.add(TableCapability.ACCEPT_ANY_SCHEMA);
      }
      all.addAll(pythonTable().capabilities());
      return all;
    }

    /**
     * The first query's scan resolves the branch head again; every later query of the same
     * DataFrame reads that snapshot (repeatable on every Spark version; the Python source's
     * later queries do so where Spark reuses its planned read, pyspark 4.3, and re-resolve on
     * 4.0). If the type's columns changed in between, the Python source reads (it handles that).
     */
    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap given) {
      CaseInsensitiveStringMap options = withProperties(given);
      if (!inferred && storedTable()) { // a session catalog table: plan its read now
        inferred = true;
        JsonNode answer = PythonBridge.ask(planReadRequest(options), null);
        if (answer.has("jvm")) {
          readPlan = answer.get("jvm");
        }
      }
      if (readPlan == null) { // inferSchema chose the Python source, or the caller gave a schema
        return ((SupportsRead) pythonTable()).newScanBuilder(options);
      }
      JsonNode first = firstScanPlan();
      if (first == null || !schema.equals(DataType.fromJson(first.get("schema").asText()))) {
        readPlan = null;
        return ((SupportsRead) pythonTable()).newScanBuilder(options);
      }
      readPlan = first;
      JsonNode plan = first;
      Map<String, String> scan = new HashMap<>();
      plan.get("options").fields().forEachRemaining(e -> scan.put(e.getKey(), e.getValue().asText()));
      if (plan.hasNonNull("storageSecrets")) { // its own option: Spark redacts a key naming a secret
        scan.put("storageSecrets", plan.get("storageSecrets").asText());
      }
      Table lance = new LanceSnapshotSource().getTable(schema, new Transform[0], scan);
      return streamable(((SupportsRead) lance).newScanBuilder(new CaseInsensitiveStringMap(scan)), options);
    }

    /**
     * The JVM scan, except that a micro-batch read ({@code readStream}) of it goes to the Python
     * source's stream reader (the change feed's stream, docs/change_feed.md): the builder and
     * its scan keep every interface they implement, and only {@code toMicroBatchStream} is
     * handed over.
     */
    private ScanBuilder streamable(ScanBuilder builder, CaseInsensitiveStringMap options) {
      return proxy(builder, (m, args) -> {
        Object out = m.invoke(builder, args);
        if ("build".equals(m.getName()) && out instanceof Scan scan) {
          return proxy(scan, (sm, sargs) -> "toMicroBatchStream".equals(sm.getName())
              ? ((SupportsRead) pythonTable()).newScanBuilder(options).build().toMicroBatchStream((String) sargs[0])
              : sm.invoke(scan, sargs));
        }
        return out;
      });
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo given) {
      CaseInsensitiveStringMap options = withProperties(given.options());
      LogicalWriteInfo info = options == given.options() ? given : withOptions(given, options);
      return new Builder(info);
    }

    /** A write: planned in Python when Spark asks for the batch write (at execution, not analysis). */
    final class Builder implements WriteBuilder, SupportsTruncate {
      private final LogicalWriteInfo info;
      private boolean truncate; // Spark's mode("overwrite")

      Builder(LogicalWriteInfo info) {
        this.info = info;
      }

      @Override
      public WriteBuilder truncate() {
        truncate = true;
        return this;
      }

      private Write pythonWrite() {
        WriteBuilder b = ((SupportsWrite) pythonTable()).newWriteBuilder(info);
        if (truncate) {
          b = ((SupportsTruncate) b).truncate();
        }
        return b.build();
      }

      @Override
      public Write build() {
        return new Write() {
          @Override
          public String description() {
            return NAME;
          }

          @Override
          public BatchWrite toBatch() {
            return planBatch();
          }

          @Override
          public StreamingWrite toStreaming() { // one graph commit per micro-batch: the Python source
            return pythonWrite().toStreaming();
          }
        };
      }

      private BatchWrite planBatch() {
        ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
        request.put("op", "plan_write");
        request.set("options", LanceSnapshotSource.JSON.valueToTree(info.options().asCaseSensitiveMap()));
        request.put("overwrite", truncate);
        request.put("schema", info.schema().json());
        PythonBridge[] held = new PythonBridge[1]; // the planner that now holds this write
        JsonNode answer = PythonBridge.ask(request, b -> held[0] = b);
        PythonBridge bridge = held[0];
        if (answer.has("python")) {
          bridge.release();
          LOG.info("omnigraph write through the Python source: {}", answer.get("python").asText());
          return pythonWrite().toBatch();
        }
        JsonNode jvm = answer.get("jvm");
        if (jvm.has("delete")) {
          LOG.info("omnigraph delete from {}: keys collected by the tasks", jvm.get("table").asText());
          return new DeleteKeysWrite(bridge, jvm.get("delete"), SparkSession.active());
        }
        return sinkWrite(bridge, jvm, info.schema());
      }
    }
  }

  /**
   * The planner's answer to {@code plan_write} for rows of {@code schema}: the JVM sink's
   * write, which the planner behind {@code bridge} commits.
   */
  static ProviderBatchWrite sinkWrite(PythonBridge bridge, JsonNode jvm, StructType schema) {
    Map<String, String> sink = new HashMap<>();
    sink.put("spec", jvm.get("spec").toString());
    if (jvm.hasNonNull("storageSecrets")) {
      sink.put("storageSecrets", jvm.get("storageSecrets").asText());
    }
    ProjectedRow.Mapping mapping = new ProjectedRow.Mapping(jvm.get("projection"), schema);
    boolean identity = mapping.identity(schema.size());
    LOG.info("omnigraph write of {} on the JVM sink ({})", jvm.get("table").asText(), identity ? "rows as given"
        : mapping.reorder() != null ? "columns read in the input's order" : "rows projected per task");
    LanceFragmentSink.WriteSpec spec = LanceFragmentSink.WriteSpec.parse(sink);
    spec.startIndexesIfLocal();
    return new ProviderBatchWrite(bridge, new LanceFragmentSink.StagingBatchWrite(spec),
        identity ? null : mapping, SparkSession.active());
  }

  /**
   * A write whose ONE graph commit is the planner's ({@link PythonBridge}): {@link #commit}
   * sends the request {@link #commitRequest} builds from the messages of the task attempts
   * Spark committed (one per partition) and runs the Spark work the planner's checks hand back
   * on the write's session ({@link SparkWork}); {@link #abort} has the planner delete what the
   * tasks staged.
   */
  abstract static class BridgedWrite implements BatchWrite {
    private final PythonBridge bridge;
    final SparkSession session; // the write's: the commit's Spark work runs on it (SparkWork)
    private boolean finished; // committed or aborted: the planner went back to the pool

    BridgedWrite(PythonBridge bridge, SparkSession session) {
      this.bridge = bridge;
      this.session = session;
    }

    /** The planner's {@code commit} request for these messages. */
    abstract ObjectNode commitRequest(WriterCommitMessage[] messages);

    @Override
    public void commit(WriterCommitMessage[] messages) {
      try {
        ObjectNode request = commitRequest(messages);
        JsonNode done = bridge.call(request, SparkWork.on(session));
        LOG.info("omnigraph write committed: manifest version {}{}", done.get("manifest_version").asText(),
            done.get("skipped").asBoolean() ? " (an applied txn token: skipped)" : "");
      } catch (RuntimeException e) {
        if (!(e instanceof PythonBridge.OmnigraphException)) { // not an answer: the hand-off or the planner failed
          abortQuietly();
        }
        throw e;
      } finally {
        finished = true;
        bridge.release(); // a dead planner is closed instead
      }
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      if (!finished) { // after a failed commit the bridge has cleaned up already
        finished = true;
        abortQuietly();
        bridge.release();
      }
    }

    private void abortQuietly() {
      try {
        ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
        request.put("op", "abort");
        bridge.call(request);
      } catch (RuntimeException e) {
        LOG.warn("omnigraph write abort: {} (the next open's recovery and cleanup remove what stays)",
            e.getMessage());
      }
    }
  }

  /**
   * The sink's tasks, then ONE graph commit in Python: the sink hands the messages to Python in
   * its hand-off file, and the bridge validates and publishes them as {@code write_table} does.
   */
  static final class ProviderBatchWrite extends BridgedWrite {
    private final LanceFragmentSink.StagingBatchWrite staging;
    private final ProjectedRow.Mapping mapping; // null: the input rows are the sink's rows

    ProviderBatchWrite(PythonBridge bridge, LanceFragmentSink.StagingBatchWrite staging,
        ProjectedRow.Mapping mapping, SparkSession session) {
      super(bridge, session);
      this.staging = staging;
      this.mapping = mapping;
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      int[] reorder = mapping == null ? null : mapping.reorder();
      if (mapping == null || reorder != null) { // the sink reads each column where it is
        return staging.createBatchWriterFactory(info, reorder);
      }
      return new ProjectingFactory(staging.createBatchWriterFactory(info), mapping);
    }

    @Override
    ObjectNode commitRequest(WriterCommitMessage[] messages) {
      staging.commit(messages); // the hand-off file
      ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
      request.put("op", "commit");
      return request;
    }
  }

  /**
   * {@code writeMode=delete}: each task collects its rows' key columns (the ones the planner
   * named, read as strings, integers or a date's days) and nothing is staged; the commit hands
   * every partition's keys to the planner, which resolves them and deletes in ONE graph commit
   * as the Python source does (the driver holds the keys: linear in the size of the delete).
   */
  static final class DeleteKeysWrite extends BridgedWrite {
    private final int[] ordinals;
    private final String[] kinds;

    DeleteKeysWrite(PythonBridge bridge, JsonNode columns, SparkSession session) {
      super(bridge, session);
      ordinals = new int[columns.size()];
      kinds = new String[columns.size()];
      for (int i = 0; i < columns.size(); i++) {
        ordinals[i] = columns.get(i).get("ordinal").asInt();
        kinds[i] = columns.get(i).get("kind").asText();
      }
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new KeysFactory(ordinals, kinds);
    }

    @Override
    ObjectNode commitRequest(WriterCommitMessage[] messages) {
      ObjectNode request = LanceSnapshotSource.JSON.createObjectNode();
      request.put("op", "commit");
      // the Python source's tasks check each Arrow batch Spark hands them; the bridge cuts the same
      request.put("batch", session.conf().get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000"));
      ArrayNode partitions = request.putArray("deletes");
      for (WriterCommitMessage m : messages) {
        ArrayNode rows = partitions.addArray();
        if (m instanceof Keys) {
          for (Object[] row : ((Keys) m).rows) {
            ArrayNode out = rows.addArray();
            for (Object v : row) {
              if (v == null) {
                out.addNull();
              } else if (v instanceof String) {
                out.add((String) v);
              } else {
                out.add(((Number) v).longValue());
              }
            }
          }
        }
      }
      return request;
    }
  }

  /** One task's delete keys. */
  static final class Keys implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    final ArrayList<Object[]> rows;

    Keys(ArrayList<Object[]> rows) {
      this.rows = rows;
    }
  }

  /** The tasks of a delete: each collects its rows' key columns. */
  static final class KeysFactory implements DataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final int[] ordinals;
    private final String[] kinds;

    KeysFactory(int[] ordinals, String[] kinds) {
      this.ordinals = ordinals;
      this.kinds = kinds;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      ArrayList<Object[]> rows = new ArrayList<>();
      return new DataWriter<InternalRow>() {
        @Override
        public void write(InternalRow row) {
          Object[] key = new Object[ordinals.length];
          for (int i = 0; i < ordinals.length; i++) {
            int o = ordinals[i];
            if (row.isNullAt(o)) {
              continue;
            }
            switch (kinds[i]) {
              case "string": key[i] = row.getUTF8String(o).toString(); break;
              case "byte": key[i] = (long) row.getByte(o); break;
              case "short": key[i] = (long) row.getShort(o); break;
              case "int": case "date": key[i] = (long) row.getInt(o); break;
              case "long": key[i] = row.getLong(o); break;
              default: throw new IllegalStateException("delete key kind " + kinds[i]);
            }
          }
          rows.add(key);
        }

        @Override
        public WriterCommitMessage commit() {
          return new Keys(rows);
        }

        @Override
        public void abort() {
          rows.clear();
        }

        @Override
        public void close() {
        }
      };
    }
  }

  /** The sink's writers, each fed the task's rows through one {@link ProjectedRow}. */
  static final class ProjectingFactory implements DataWriterFactory {
    private final DataWriterFactory inner;
    private final ProjectedRow.Mapping mapping;

    ProjectingFactory(DataWriterFactory inner, ProjectedRow.Mapping mapping) {
      this.inner = inner;
      this.mapping = mapping;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      DataWriter<InternalRow> writer = inner.createWriter(partitionId, taskId);
      ProjectedRow view = new ProjectedRow(mapping);
      return new DataWriter<InternalRow>() {
        @Override
        public void write(InternalRow row) throws java.io.IOException {
          writer.write(view.of(row));
        }

        @Override
        public WriterCommitMessage commit() throws java.io.IOException {
          return writer.commit();
        }

        @Override
        public void abort() throws java.io.IOException {
          writer.abort();
        }

        @Override
        public void close() throws java.io.IOException {
          writer.close();
        }
      };
    }
  }

  /** A call forwarded by {@link #proxy}. */
  private interface Forward {
    Object call(Method method, Object[] args) throws Exception;
  }

  /** {@code target} behind a proxy with every interface its class and superclasses implement. */
  @SuppressWarnings("unchecked")
  private static <T> T proxy(T target, Forward forward) {
    Set<Class<?>> interfaces = new LinkedHashSet<>();
    for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
      interfaces.addAll(Arrays.asList(c.getInterfaces()));
    }
    InvocationHandler handler = (p, m, args) -> {
      try {
        return forward.call(m, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    };
    return (T) Proxy.newProxyInstance(target.getClass().getClassLoader(), interfaces.toArray(new Class<?>[0]), handler);
  }

  /** {@code info} with {@code options} in place of its own: how a table adds its stored options. */
  static LogicalWriteInfo withOptions(LogicalWriteInfo info, CaseInsensitiveStringMap options) {
    return new LogicalWriteInfo() {
      @Override
      public CaseInsensitiveStringMap options() {
        return options;
      }

      @Override
      public String queryId() {
        return info.queryId();
      }

      @Override
      public StructType schema() {
        return info.schema();
      }

      @Override
      public java.util.Optional<StructType> rowIdSchema() {
        return info.rowIdSchema();
      }

      @Override
      public java.util.Optional<StructType> metadataSchema() {
        return info.metadataSchema();
      }
    };
  }
}
