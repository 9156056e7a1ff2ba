package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.SparkSession;
import org.lance.Dataset;
import org.lance.Fragment;
import org.lance.FragmentMetadata;
import org.lance.fragment.DeletionFile;
import org.lance.ipc.LanceScanner;
import org.lance.ipc.ScanOptions;

/**
 * The committed rows a merge replaces, found and given deletion files by Spark tasks, one task
 * per group of the table's fragments: each task probes its fragments' ids against the
 * executor's {@link NodeIdIndex} of the ids the merge staged (built once per executor and load)
 * and writes one deletion file per fragment it touches ({@link Fragment#deleteRows}). The driver
 * gets one small JSON object per touched fragment and commits them (Python:
 * {@code spark/dist_checks.py::DistChecks.replaced}, {@code store/writes.py::Replaced}); which
 * rows a merge replaces (those whose id it stages) and how the commit uses them stay there.
 *
 * <p>Nothing here commits: a deletion file no commit references is an orphan for cleanup, as
 * a staged fragment is. A failure (the staged ids too many for a quarter of an executor's heap,
 * an unreadable file) fails the job, and the driver finds the rows with a Spark SQL join instead.
 */
public final class MergeReplace {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(MergeReplace.class);

  private MergeReplace() {}

  /**
   * Driver: a {@link SparkWork} the planner hands back, or a Python driver's own session
   * (py4j, {@code write_table}). {@code spec}: {"load": a token unique to the load, "table": {path, branch,
   * version} (the committed table at the pinned version), "staged": {"table": null, "files":
   * [...]} (a {@link NodeIdIndex} source of the staged ids), "fragments": [ids], "storage":
   * {Lance storage options}}. Returns a JSON array with one object per fragment holding a
   * replaced row: {"fragment", "rows" (replaced), "deletion": {pylance's deletion file fields}
   * or null when every row of the fragment is now deleted}.
   */
  public static String run(SparkSession spark, String spec) throws Exception {
    JsonNode s = LanceSnapshotSource.JSON.readTree(spec);
    List<Integer> fragments = new ArrayList<>();
    for (JsonNode f : s.get("fragments")) {
      fragments.add(f.asInt());
    }
    if (fragments.isEmpty()) {
      return "[]";
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    int slices = Math.max(1, Math.min(fragments.size(), 4 * jsc.defaultParallelism()));
    List<String> out = jsc.parallelize(fragments, slices).mapPartitions(new Task(spec)).collect();
    return "[" + String.join(",", out) + "]";
  }

  /** One task: its fragments' replaced rows, each fragment's deletion file written. */
  static final class Task implements FlatMapFunction<Iterator<Integer>, String> {
    private static final long serialVersionUID = 1L;
    private final String spec;

    Task(String spec) {
      this.spec = spec;
    }

    @Override
    public Iterator<String> call(Iterator<Integer> fragments) throws Exception {
      if (!fragments.hasNext()) {
        return Collections.emptyIterator();
      }
      JsonNode s = LanceSnapshotSource.JSON.readTree(spec);
      Map<String, String> storage = new HashMap<>();
      s.get("storage").fields().forEachRemaining(e -> storage.put(e.getKey(), e.getValue().asText()));
      NodeIdIndex staged = NodeIdIndex.of(s.get("load").asText(), s.get("staged"), storage).join();
      JsonNode t = s.get("table");
      String path = t.get("path").asText();
      JsonNode branch = t.get("branch");
      List<String> out = new ArrayList<>();
      try (BufferAllocator allocator = new RootAllocator();
           Dataset ds = LanceSnapshotSource.openAt(allocator, path, branch == null || branch.isNull() ? null
               : branch.asText(), t.get("version").asLong(), storage)) {
        NodeIdIndex.Probe probe = new NodeIdIndex.Probe();
        while (fragments.hasNext()) {
          int fid = fragments.next();
          List<Integer> offsets = replaced(ds, allocator, fid, staged, probe, path);
          if (offsets.isEmpty()) {
            continue;
          }
          FragmentMetadata m = new Fragment(ds, fid).deleteRows(offsets);
          ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
          o.put("fragment", fid);
          o.put("rows", offsets.size());
          if (m == null || m.getDeletionFile() == null) {
            o.putNull("deletion");
          } else {
            DeletionFile d = m.getDeletionFile();
            ObjectNode del = o.putObject("deletion");
            del.put("read_version", d.getReadVersion());
            del.put("id", new BigInteger(Long.toUnsignedString(d.getId()))); // a u64
            del.put("file_type", d.getFileType().name().toLowerCase(java.util.Locale.ROOT));
            del.put("num_deleted_rows", d.getNumDeletedRows());
            if (d.getBaseId().isPresent()) {
              del.put("base_id", d.getBaseId().get());
            } else {
              del.putNull("base_id");
            }
          }
          out.add(o.toString());
        }
      }
      LOG.info("a merge replaces rows in {} fragments of {} (this task)", out.size(), path);
      return out.iterator();
    }

    /** The offsets of fragment {@code fid}'s live rows whose id is in {@code staged}. */
    private static List<Integer> replaced(Dataset ds, BufferAllocator allocator, int fid, NodeIdIndex staged,
        NodeIdIndex.Probe probe, String path) throws Exception {
      List<Integer> offsets = new ArrayList<>();
      ScanOptions opts = new ScanOptions.Builder().columns(Collections.singletonList("id"))
          .fragmentIds(Collections.singletonList(fid)).withRowAddress(true).batchSize(65_536).build();
      try (LanceScanner sc = LanceScanner.create(ds, opts, allocator); ArrowReader r = sc.scanBatches()) {
        while (r.loadNextBatch()) {
          VectorSchemaRoot root = r.getVectorSchemaRoot();
          StringValues ids = new StringValues((VarCharVector) root.getVector("id"));
          if (ids.nulls > 0) { // offsets below are by row: a committed id is never null
            throw new IllegalStateException("fragment " + fid + " of " + path + " has a null id");
          }
          UInt8Vector addr = (UInt8Vector) root.getVector("_rowaddr");
          boolean[] hit = new boolean[ids.n];
          probe.hits(staged, ids.bytes, ids.starts, ids.lens, ids.n, hit);
          for (int i = 0; i < ids.n; i++) {
            if (hit[i]) {
              long a = addr.get(i);
              if ((a >>> 32) != fid) {
                throw new IllegalStateException("row address " + a + " outside fragment " + fid + " of " + path);
              }
              offsets.add((int) a);
            }
          }
        }
      }
      return offsets;
    }
  }
}
