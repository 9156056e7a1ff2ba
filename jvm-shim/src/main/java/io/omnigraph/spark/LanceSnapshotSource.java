package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.lance.Dataset;
import org.lance.ReadOptions;
import org.lance.Ref;

/**
 * The JVM read path of omnigraph-spark: scans one Lance table at one pinned version into Spark
 * columnar batches, with no Python worker in between.
 *
 * <p>Why it exists: a Python DataSource read moves every row through a Python worker and back,
 * which caps a full scan well below Spark's Parquet reader (docs/benchmarks.md). This source
 * does only the scan. Everything that needs the graph format (snapshot resolution, branches,
 * type checks, partition planning) stays in Python: {@code omnigraph_spark.spark.jvm_read} plans
 * the read on the driver and passes the result here as options. It is not registered under a
 * short name, so it can never shadow the Python {@code omnigraph} source.
 *
 * <p>Options (all set by the Python planner): {@code path} dataset URI, {@code version} pinned
 * table version, {@code branch} owning Lance branch (absent = main), {@code partitions} JSON list
 * of {@code {"fragments": [ids], "filter": sql-or-null}}, {@code table} a display name,
 * {@code batchSize}, {@code storageSecrets} a JSON object of Lance storage options (object stores;
 * the key names a secret so Spark redacts the value wherever it prints options). The schema is
 * always given by the caller.
 */
public final class LanceSnapshotSource implements TableProvider {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  static final ObjectMapper JSON = new ObjectMapper();

  /** An option the Python planner always sets (shared by the read source and the write sink). */
  static String require(CaseInsensitiveStringMap m, String key) {
    String v = m.get(key);
    if (v == null) {
      throw new IllegalArgumentException("option '" + key + "' is required");
    }
    return v;
  }

  /** A table at a pinned version on its Lance lineage ({@code branch} null: main). */
  static Dataset openAt(BufferAllocator allocator, String path, String branch, long version) {
    return openAt(allocator, path, branch, version, Map.of());
  }

  /** The same, on a store that needs Lance storage options (credentials, endpoint). */
  static Dataset openAt(BufferAllocator allocator, String path, String branch, long version,
      Map<String, String> storageOptions) {
    if (branch == null) {
      return Dataset.open(allocator, path,
          new ReadOptions.Builder().setVersion(version).setStorageOptions(storageOptions).build());
    }
    try (Dataset head = Dataset.open(allocator, path,
        new ReadOptions.Builder().setStorageOptions(storageOptions).build())) {
      return head.checkout(Ref.ofBranch(branch, version));
    }
  }

  /**
   * The option of the Python side's probe for the shim ({@code omnigraph_spark.spark.jvm_read.shim_loaded}):
   * {@code spark.read.format(this class).option("probe", "true").load()} resolves to an empty
   * relation whose one column is {@link #PROBE_COLUMN}. Resolving a plan needs no py4j, so the
   * same probe answers on a classic session and through Spark Connect, and it loads the class
   * through the same class loader as a real read or write.
   */
  static final String PROBE_OPTION = "probe";

  /** The probe relation's one column: names the protocol of the options the Python side sends. */
  static final String PROBE_COLUMN = "omnigraph_shim_v1";

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    if (options.containsKey(PROBE_OPTION)) {
      requireLibraries();
      return new StructType().add(PROBE_COLUMN, org.apache.spark.sql.types.DataTypes.StringType);
    }
    throw new IllegalArgumentException(
        "io.omnigraph.spark.LanceSnapshotSource needs a schema; use omnigraph_spark.read_table()");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    if (new CaseInsensitiveStringMap(properties).containsKey(PROBE_OPTION)) {
      return new ProbeTable(schema);
    }
    return new SnapshotTable(schema, ScanSpec.parse(properties));
  }

  /**
   * The probe fails unless the shim's libraries load too: a shim jar without them (e.g.
   * {@code spark.jars.packages} replaced by another helper) would pass the probe and fail the
   * first real read or write.
   */
  private static void requireLibraries() {
    for (String name : new String[] {"org.lance.Dataset", "org.apache.arrow.c.Data",
        "org.apache.arrow.dataset.scanner.Scanner"}) {
      try {
        Class.forName(name, false, LanceSnapshotSource.class.getClassLoader());
      } catch (ClassNotFoundException | LinkageError e) {
        throw new IllegalStateException("the shim's libraries are not on the class path: " + name
            + " does not load (org.lance:lance-core:7.0.0, org.apache.arrow:arrow-c-data:19.0.0, "
            + "org.apache.arrow:arrow-dataset:18.3.0)", e);
      }
    }
  }

  /**
   * The probe's relation: Spark resolves a provider's table only if it can batch-read it, so it
   * scans as empty (the Python side reads only its schema).
   */
  static final class ProbeTable implements SupportsRead {
    private final StructType schema;

    ProbeTable(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return "omnigraph shim probe";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return () -> new Scan() {
        @Override
        public StructType readSchema() {
          return schema;
        }

        @Override
        public Batch toBatch() {
          return new Batch() {
            @Override
            public InputPartition[] planInputPartitions() {
              return new InputPartition[0];
            }

            @Override
            public PartitionReaderFactory createReaderFactory() {
              return partition -> {
                throw new IllegalStateException("the shim probe has no partitions");
              };
            }
          };
        }
      };
    }
  }

  /** The parsed options: small and serialisable, shipped to executors with each partition. */
  static final class ScanSpec implements java.io.Serializable {
    final String path;
    final long version;
    final String branch;
    final String table;
    final int batchSize;
    final List<PartitionSpec> partitions;
    final HashMap<String, String> storageOptions;
    final HashMap<String, String> pushable; // column -> kind, see FilterSql

    ScanSpec(String path, long version, String branch, String table, int batchSize, List<PartitionSpec> parts,
        HashMap<String, String> storageOptions, HashMap<String, String> pushable) {
      this.path = path;
      this.version = version;
      this.branch = branch;
      this.table = table;
      this.batchSize = batchSize;
      this.partitions = parts;
      this.storageOptions = storageOptions;
      this.pushable = pushable;
    }

    static ScanSpec parse(Map<String, String> o) {
      CaseInsensitiveStringMap m = new CaseInsensitiveStringMap(o);
      String path = require(m, "path");
      long version = Long.parseLong(require(m, "version"));
      List<PartitionSpec> parts = new ArrayList<>();
      HashMap<String, String> storage = new HashMap<>();
      HashMap<String, String> pushable = new HashMap<>();
      try {
        String kinds = m.get("pushable");
        if (kinds != null) {
          JSON.readTree(kinds).fields().forEachRemaining(e -> pushable.put(e.getKey(), e.getValue().asText()));
        }
        String secrets = m.get("storageSecrets");
        if (secrets != null) {
          JSON.readTree(secrets).fields().forEachRemaining(e -> storage.put(e.getKey(), e.getValue().asText()));
        }
        for (JsonNode p : JSON.readTree(require(m, "partitions"))) {
          List<Integer> ids = new ArrayList<>();
          for (JsonNode id : p.get("fragments")) {
            ids.add(id.asInt());
          }
          JsonNode f = p.get("filter");
          parts.add(new PartitionSpec(ids, f == null || f.isNull() ? null : f.asText()));
        }
      } catch (IOException e) {
        throw new UncheckedIOException("bad 'partitions', 'storageSecrets' or 'pushable' option", e);
      }
      return new ScanSpec(path, version, m.get("branch"), m.getOrDefault("table", path),
          Integer.parseInt(m.getOrDefault("batchSize", "65536")), parts, storage, pushable);
    }

  }

  /** One read task: whole fragments, or one fragment restricted by a row-address filter. */
  static final class PartitionSpec implements InputPartition {
    final List<Integer> fragments;
    final String filter;

    PartitionSpec(List<Integer> fragments, String filter) {
      this.fragments = fragments;
      this.filter = filter;
    }
  }

  static final class SnapshotTable implements SupportsRead {
    private final StructType schema;
    private final ScanSpec spec;

    SnapshotTable(StructType schema, ScanSpec spec) {
      this.schema = schema;
      this.spec = spec;
    }

    @Override
    public String name() {
      return "omnigraph " + spec.table + " @v" + spec.version;
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new SnapshotScan(schema, spec);
    }
  }

  /**
   * Column pruning, and filters Lance can evaluate exactly ({@link FilterSql}): Lance then reads
   * the other columns only for the rows that pass. Spark still applies every filter itself.
   */
  static final class SnapshotScan
      implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters, Scan, Batch {
    private StructType schema;
    private final ScanSpec spec;
    private Filter[] pushed = new Filter[0];
    private String pushedSql; // null: nothing pushed

    SnapshotScan(StructType schema, ScanSpec spec) {
      this.schema = schema;
      this.spec = spec;
    }

    @Override
    public void pruneColumns(StructType required) {
      this.schema = required;
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Filter> ok = new ArrayList<>();
      List<String> sql = new ArrayList<>();
      for (Filter f : filters) {
        String s = FilterSql.translate(f, spec.pushable);
        if (s != null) {
          ok.add(f);
          sql.add(s);
        }
      }
      pushed = ok.toArray(new Filter[0]);
      pushedSql = sql.isEmpty() ? null : String.join(" AND ", sql);
      return filters; // Spark applies them all after the scan too
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return "omnigraph " + spec.table + " @v" + spec.version + " (" + spec.partitions.size() + " tasks"
          + (pushedSql == null ? ")" : ", Lance filter: " + pushedSql + ")");
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return spec.partitions.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new SnapshotReaderFactory(schema, spec, pushedSql);
    }
  }
}
