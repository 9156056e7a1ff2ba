package io.omnigraph.spark;

import static io.omnigraph.spark.LanceSnapshotSource.require;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM write path of omnigraph-spark: executors stage one table's rows as UNCOMMITTED Lance
 * fragments, with no Python worker in between. It commits nothing.
 *
 * <p>Why it exists: a Python writer receives every row through a Python worker, which alone costs
 * about what Spark's whole Parquet write costs (docs/benchmarks.md). This sink does only the
 * staging: the Python driver ({@code omnigraph_spark.spark.jvm_write}) plans the write (the
 * projection into the table's exact column order and types, the row rules below), and after the
 * job it reads the hand-off file this sink's {@link BatchWrite#commit} writes, validates the load
 * and commits it exactly as a Python-staged load (one graph commit, sidecar-guarded).
 *
 * <p>Per row, in the executor ({@link FragmentStager}): non-nullable columns must not be null,
 * enum values must be allowed, null ids get fresh ULIDs. Errors carry the connector's error code
 * as a message prefix ({@code [NULL_VIOLATION] ...}) and name the table, column, row and value,
 * worded exactly as the Python path words them.
 *
 * <p>Files: each task attempt that finishes notes its data files in the load's staging journal
 * ({@code journal} option, the directory the Python driver cleans); an aborted attempt deletes
 * its files itself on a local root and journals them on an object store (the Lance SDK has no
 * delete; the Python driver deletes every journaled file it does not commit). Local roots and
 * object stores alike: the data files, the id indexes and the side files ({@link SideFiles})
 * go through the Lance SDK with the {@code storageSecrets} options. Not registered under a
 * short name, so it never shadows the Python source.
 */
public final class LanceFragmentSink implements TableProvider {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(LanceFragmentSink.class);

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException(
        "io.omnigraph.spark.LanceFragmentSink is planned by omnigraph_spark.write_table()/write_graph()");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    WriteSpec spec = WriteSpec.parse(properties);
    spec.startIndexesIfLocal();
    return new SinkTable(schema, spec);
  }

  /** The parsed options: small and serialisable, shipped to executors with the writer factory. */
  static final class WriteSpec implements Serializable {
    final String datasetUri;
    final String tableKey;
    final String label; // "node Item" / "edge Link", as error messages name the table
    final String typeName;
    final String where; // "Item partition" -> "(Item partition 3)"
    final byte[] arrowSchema; // the table's Arrow schema, IPC-serialised by pyarrow
    final String mintColumn; // null ids get ULIDs here (null: no minting)
    final List<ColumnRule> rules; // in the order the Python converter applies them
    final Map<String, String> kinds; // column -> "micros" (DateTime from Spark micros) | "null" (not given)
    final int maxRowsPerFile;
    final long maxBytesPerFile; // 0: Lance's default
    final int batchRows;
    final String dataStorageVersion; // the table's ("2.2"): Lance's writer default may differ
    final String journal;
    final String handoff;
    final String endpoints; // {"src": ids, "dst": ids} (see NodeIdIndex): check while staging; null: do not
    final String uniqueColumn; // fingerprint this column for the driver's uniqueness proof (KeyHashes); null: do not
    final String freshIds; // {"load": token, "ids": committed ids} (see FreshIdCheck): probe while staging; null: do not
    /**
     * Lance storage options (object-store credentials, endpoint), from the {@code storageSecrets}
     * option: its own option, never inside {@code spec}, because Spark redacts the value of an
     * option whose key matches {@code spark.redaction.regex} (the default matches "secret") in
     * plan strings and the event log. Empty: Lance's defaults (a local root, or credentials
     * from the executor's environment). Never logged, never in a message.
     */
    final HashMap<String, String> storageOptions;

    private WriteSpec(CaseInsensitiveStringMap m) {
      this.datasetUri = require(m, "datasetUri");
      this.tableKey = require(m, "tableKey");
      this.label = require(m, "label");
      this.typeName = require(m, "typeName");
      this.where = m.getOrDefault("where", "partition");
      this.arrowSchema = Base64.getDecoder().decode(require(m, "arrowSchema"));
      this.mintColumn = m.get("mintColumn");
      this.maxRowsPerFile = Integer.parseInt(m.getOrDefault("maxRowsPerFile", "1048576"));
      this.maxBytesPerFile = Long.parseLong(m.getOrDefault("maxBytesPerFile", "0"));
      this.batchRows = Integer.parseInt(m.getOrDefault("batchRows", "65536"));
      this.dataStorageVersion = require(m, "dataStorageVersion");
      this.journal = require(m, "journal");
      this.handoff = require(m, "handoff");
      this.endpoints = m.get("endpoints");
      this.uniqueColumn = m.get("uniqueColumn");
      this.freshIds = m.get("freshIds");
      this.storageOptions = new HashMap<>();
      this.rules = new ArrayList<>();
      this.kinds = new java.util.HashMap<>();
      String secrets = m.get("storageSecrets");
      if (secrets != null) {
        try {
          LanceSnapshotSource.JSON.readTree(secrets).fields()
              .forEachRemaining(e -> storageOptions.put(e.getKey(), e.getValue().asText()));
        } catch (IOException e) { // the message of a JSON error would quote the value: not passed on
          throw new IllegalArgumentException("bad 'storageSecrets' option (not a JSON object of strings)");
        }
      }
      try {
        LanceSnapshotSource.JSON.readTree(m.getOrDefault("kinds", "{}")).fields()
            .forEachRemaining(e -> kinds.put(e.getKey(), e.getValue().asText()));
        for (JsonNode r : LanceSnapshotSource.JSON.readTree(require(m, "rules"))) {
          List<String> allowed = null;
          if (r.hasNonNull("enum")) {
            allowed = new ArrayList<>();
            for (JsonNode v : r.get("enum")) {
              allowed.add(v.asText());
            }
          }
          rules.add(new ColumnRule(r.get("column").asText(),
              r.hasNonNull("notNull") ? r.get("notNull").asText() : null, allowed));
        }
      } catch (IOException e) {
        throw new UncheckedIOException("bad 'rules' option", e);
      }
    }

    /**
     * The spec of a write's options. The Python planner sends them as one option, {@code spec}: a
     * JSON object of string values (one py4j call instead of one per option).
     */
    static WriteSpec parse(Map<String, String> options) {
      Map<String, String> all = new HashMap<>();
      String packed = null;
      for (Map.Entry<String, String> e : options.entrySet()) {
        if (e.getKey().equalsIgnoreCase("spec")) {
          packed = e.getValue();
        } else {
          all.put(e.getKey(), e.getValue());
        }
      }
      if (packed != null) {
        try {
          LanceSnapshotSource.JSON.readTree(packed).fields().forEachRemaining(e -> all.put(e.getKey(),
              e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString()));
        } catch (IOException e) {
          throw new UncheckedIOException("bad 'spec' option", e);
        }
      }
      return new WriteSpec(new CaseInsensitiveStringMap(all));
    }

    /**
     * With a local master this JVM runs the tasks: start building the node id indexes they will
     * probe now, while Spark plans the write, rather than when the first task starts. The checks
     * start their indexes as they are made, keyed by load and source ({@link NodeIdIndex#of}), so
     * the tasks' own checks find these. Call on the driver. A cluster's driver runs no task, so it
     * builds nothing.
     */
    void startIndexesIfLocal() {
      if (endpoints == null && freshIds == null) {
        return;
      }
      try {
        if (!SparkSession.active().sparkContext().isLocal()) {
          return;
        }
        if (endpoints != null) {
          new EndpointCheck(LanceSnapshotSource.JSON.readTree(endpoints), label, storageOptions);
        }
        if (freshIds != null) {
          new FreshIdCheck(LanceSnapshotSource.JSON.readTree(freshIds), label, storageOptions);
        }
      } catch (IOException | RuntimeException e) { // the tasks start them (and report a bad option)
        LOG.debug("{}: node id indexes not started ahead: {}", tableKey, e.toString());
      }
    }

  }

  /** One column's row rules: non-null (with the catalog type to name) and/or enum membership. */
  static final class ColumnRule implements Serializable {
    final String column;
    final String notNull; // the catalog type as written ("I64", "String"); null: nullable
    final List<String> allowed; // enum values in catalog order; null: not an enum

    ColumnRule(String column, String notNull, List<String> allowed) {
      this.column = column;
      this.notNull = notNull;
      this.allowed = allowed;
    }
  }

  static final class SinkTable implements SupportsWrite {
    private final StructType schema;
    private final WriteSpec spec;

    SinkTable(StructType schema, WriteSpec spec) {
      this.schema = schema;
      this.spec = spec;
    }

    @Override
    public String name() {
      return "omnigraph staging " + spec.tableKey;
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      // the planner already projected the exact columns: Spark must not re-resolve them
      return EnumSet.of(TableCapability.BATCH_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return new WriteBuilder() {
        @Override
        public Write build() {
          return new Write() {
            @Override
            public BatchWrite toBatch() {
              return new StagingBatchWrite(spec);
            }

            @Override
            public String description() {
              return "omnigraph staging of " + spec.tableKey;
            }
          };
        }
      };
    }
  }

  /** What one task attempt staged: the fragments' JSON as pylance's FragmentMetadata reads it. */
  static final class StagedMessage implements WriterCommitMessage {
    final int partition;
    final long taskId;
    final long rows;
    final long bytes;
    final long givenIds;
    final List<String> fragments;
    final long dangling; // rows with an unknown endpoint (-1: not checked, see EndpointCheck)
    final int srcBound; // no source has more edges in this task (-1: not counted)
    final String srcSketch; // the file of this task's source bucket counts (null: none, see EndpointCheck#sketch)
    final String keyHashes; // the file of this task's key fingerprints (null: none)
    final long freshConflicts; // staged ids already committed (-1: not checked, see FreshIdCheck)

    StagedMessage(int partition, long taskId, long rows, long bytes, long givenIds, List<String> fragments,
        long dangling, int srcBound, String srcSketch, String keyHashes, long freshConflicts) {
      this.partition = partition;
      this.taskId = taskId;
      this.rows = rows;
      this.bytes = bytes;
      this.givenIds = givenIds;
      this.fragments = fragments;
      this.dangling = dangling;
      this.srcBound = srcBound;
      this.srcSketch = srcSketch;
      this.keyHashes = keyHashes;
      this.freshConflicts = freshConflicts;
    }
  }

  /** What a task attempt whose rows broke a rule returns instead of failing: the error, nothing staged. */
  static final class RefusedMessage implements WriterCommitMessage {
    final int partition;
    final long taskId;
    final String error; // RowRuleException.toJson()

    RefusedMessage(int partition, long taskId, String error) {
      this.partition = partition;
      this.taskId = taskId;
      this.error = error;
    }
  }

  /**
   * Driver side. {@link #commit} receives exactly the messages of the attempts Spark committed
   * (one per partition) and hands them to the Python driver through a file in the load's staging
   * journal (under the graph root, which the Python driver reads: on Spark Connect that driver is
   * another process than this JVM's, possibly on another machine); it commits nothing to the graph. {@link #abort} leaves the files to the Python driver, which deletes
   * every journaled file of a failed job.
   */
  static final class StagingBatchWrite implements BatchWrite {
    private final WriteSpec spec;

    StagingBatchWrite(WriteSpec spec) {
      this.spec = spec;
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new StagerFactory(spec, null);
    }

    /** The writers of rows whose column {@code inputOrdinals[c]} is the sink's column {@code c}. */
    DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info, int[] inputOrdinals) {
      return new StagerFactory(spec, inputOrdinals);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      ObjectNode out = LanceSnapshotSource.JSON.createObjectNode();
      ArrayNode tasks = out.putArray("tasks");
      for (WriterCommitMessage m : messages) {
        if (m instanceof RefusedMessage) { // the Python driver raises the typed error (bad_rows.py)
          RefusedMessage r = (RefusedMessage) m;
          ObjectNode t = tasks.addObject();
          t.put("partition", r.partition);
          t.put("task_id", r.taskId);
          try {
            t.set("error", LanceSnapshotSource.JSON.readTree(r.error));
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
          continue;
        }
        if (!(m instanceof StagedMessage)) {
          continue;
        }
        StagedMessage s = (StagedMessage) m;
        ObjectNode t = tasks.addObject();
        t.put("partition", s.partition);
        t.put("task_id", s.taskId);
        t.put("rows", s.rows);
        t.put("bytes", s.bytes);
        t.put("given_ids", s.givenIds);
        t.put("dangling", s.dangling);
        t.put("src_bound", s.srcBound);
        t.put("src_sketch", s.srcSketch);
        t.put("key_hashes", s.keyHashes);
        t.put("fresh_conflicts", s.freshConflicts);
        ArrayNode frags = t.putArray("fragments");
        s.fragments.forEach(frags::add);
      }
      SideFiles.writeText(spec.handoff, out.toString(), spec.storageOptions);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      // the Python driver deletes every journaled file of this load when save() fails
    }
  }

  static final class StagerFactory implements DataWriterFactory {
    private final WriteSpec spec;
    private final int[] inputOrdinals; // null: the rows are the sink's rows

    StagerFactory(WriteSpec spec, int[] inputOrdinals) {
      this.spec = spec;
      this.inputOrdinals = inputOrdinals;
    }

    @Override
    public org.apache.spark.sql.connector.write.DataWriter<org.apache.spark.sql.catalyst.InternalRow> createWriter(
        int partitionId, long taskId) {
      return new FragmentStager(spec, partitionId, taskId, inputOrdinals);
    }
  }

  /** Node-id indexes built from the data in this JVM so far (tests: a reuse across loads does not build). */
  public static long nodeIndexBuilds() {
    return NodeIdIndex.builds();
  }

  /** Of {@link #nodeIndexBuilds}, those whose slots hold ULIDs (tests). */
  public static long nodeIndexUlidBuilds() {
    return NodeIdIndex.ulidBuilds();
  }

  /** Node-id index builds that started with ULID slots and again with bytes (tests). */
  public static long nodeIndexBuildsAgainAsBytes() {
    return NodeIdIndex.againAsBytes();
  }

  /** Forgets the node-id indexes this JVM keeps in memory across loads, as a fresh JVM starts (tests). */
  public static void forgetNodeIndexes() {
    NodeIdIndex.forgetKept();
  }

  /** Write a small text file completely, then rename it into place (readers see all or nothing). */
  static void writeAtomically(Path path, String text) {
    writeAtomically(path, text.getBytes(StandardCharsets.UTF_8));
  }

  /** Write a file completely, then rename it into place (readers see all or nothing). */
  static void writeAtomically(Path path, byte[] data) {
    Path tmp = path.resolveSibling("." + path.getFileName() + ".tmp");
    try {
      Files.createDirectories(path.getParent());
      Files.write(tmp, data);
      Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write " + path, e);
    }
  }
}
