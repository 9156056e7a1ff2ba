package io.omnigraph.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.omnigraph.spark.LanceFragmentSink.StagedMessage;
import io.omnigraph.spark.LanceFragmentSink.WriteSpec;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.c.ArrowArrayStream;
import org.apache.arrow.c.Data;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.lance.Fragment;
import org.lance.FragmentMetadata;
import org.lance.WriteParams;
import org.lance.fragment.DataFile;

/**
 * One task attempt of the JVM write path: Spark rows -> Arrow batches ({@link RowWriter})
 * -> {@link RowRules} -> one streaming Lance fragment write.
 *
 * <p>Memory is bounded: the task thread fills one batch of {@code batchRows} rows while a second
 * thread runs {@code Fragment.write()} over a stream fed by a queue of at most two batches
 * (encoding overlaps conversion). Nothing is committed; {@link #commit} returns the fragments'
 * metadata and notes their files in the load's staging journal, {@link #abort} deletes them.
 */
final class FragmentStager implements DataWriter<InternalRow> {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(FragmentStager.class);
  private static final Object END = new Object();
  private static final Object FAILED = new Object();
  private static final long ABORT_WAIT_MS = 60_000;
  /** the kind of a column whose values are another column's: "copy:" + that column */
  private static final String COPY = "copy:";

  private final WriteSpec spec;
  private final int partitionId;
  private final long taskId;
  private final BufferAllocator allocator = new RootAllocator(Long.MAX_VALUE);
  private final Schema schema;
  private final RowRules rules;
  private final EndpointCheck ends; // null: the driver checks this load's endpoints itself
  private final KeyHashes keys; // null: the driver checks the key's uniqueness itself
  private final FreshIdCheck fresh; // null: the driver checks an append's ids against the committed ones
  private final BlockingQueue<Object> queue = new ArrayBlockingQueue<>(2);

  private VectorSchemaRoot root;
  private RowWriter writer;
  private final java.util.Map<String, BigIntVector> micro = new java.util.HashMap<>();
  private int inBatch;
  private long rows;
  private Thread lance;
  private volatile Throwable lanceError;
  private volatile List<FragmentMetadata> written;
  private RowRules.RowRuleException refused; // a row broke a rule: nothing more is staged

  private final int[] inputOrdinals; // where each row writer column is in the input rows (null: in order)

  FragmentStager(WriteSpec spec, int partitionId, long taskId, int[] inputOrdinals) {
    this.spec = spec;
    this.inputOrdinals = inputOrdinals;
    this.partitionId = partitionId;
    this.taskId = taskId;
    try {
      this.schema = MessageSerializer.deserializeSchema(
          new ReadChannel(Channels.newChannel(new ByteArrayInputStream(spec.arrowSchema))));
    } catch (IOException e) {
      throw new IllegalArgumentException("bad 'arrowSchema' option", e);
    }
    this.rules = new RowRules(spec, spec.where + " " + partitionId);
    try {
      this.ends = spec.endpoints == null ? null
          : new EndpointCheck(LanceSnapshotSource.JSON.readTree(spec.endpoints), spec.label, spec.storageOptions);
    } catch (IOException e) {
      throw new IllegalArgumentException("bad 'endpoints' option", e);
    }
    this.keys = spec.uniqueColumn == null ? null : new KeyHashes(spec.uniqueColumn);
    try {
      this.fresh = spec.freshIds == null ? null
          : new FreshIdCheck(LanceSnapshotSource.JSON.readTree(spec.freshIds), spec.label, spec.storageOptions);
    } catch (IOException e) {
      throw new IllegalArgumentException("bad 'freshIds' option", e);
    }
  }

  @Override
  public void write(InternalRow row) throws IOException {
    if (refused != null) {
      return; // a row broke a rule: the rest of the partition is not staged (Spark still hands it over)
    }
    if (writer == null) {
      newBatch();
    }
    writer.write(row);
    if (++inBatch >= spec.batchRows) {
      try {
        flush();
      } catch (RowRules.RowRuleException e) {
        refuse(e);
      }
    }
  }

  /**
   * A row broke a rule: a deterministic data error, so this attempt does not fail (Spark would log
   * it and retry it, recomputing the input). It stops staging, deletes what it staged, and its
   * commit message carries the error instead (see omnigraph_spark/spark/bad_rows.py).
   */
  private void refuse(RowRules.RowRuleException e) throws IOException {
    refused = e;
    if (root != null) {
      root.close();
      root = null;
    }
    writer = null;
    inBatch = 0;
    if (lance != null) {
      try {
        offer(END); // let Lance finish the files it started, so that they are known and deleted
        join();
      } catch (IOException stopped) {
        LOG.debug("{}: the Lance writer had stopped: {}", spec.tableKey, stopped.getMessage());
      }
    }
    deleteWritten();
    LOG.info("{} partition {}: {}; staged files removed", spec.tableKey, partitionId, e.getMessage());
  }

  /**
   * A fresh batch in the table's schema. {@link RowWriter} fills the plain columns in place; a
   * DateTime column fed by Spark microseconds goes through a temporary BigInt vector; columns the
   * DataFrame does not give ("null") and a keyed node's id ("copy:" its key column) are not in
   * Spark's rows at all (see {@link #finishColumns}).
   */
  private void newBatch() {
    root = VectorSchemaRoot.create(schema, allocator);
    List<FieldVector> vectors = new ArrayList<>();
    for (FieldVector v : root.getFieldVectors()) {
      String kind = spec.kinds.get(v.getName());
      if (kind == null) {
        vectors.add(v);
      } else if (kind.equals("micros")) {
        BigIntVector micros = new BigIntVector(v.getName(), allocator);
        micro.put(v.getName(), micros);
        vectors.add(micros);
      } else if (!kind.equals("null") && !kind.startsWith(COPY)) {
        throw new IllegalArgumentException(spec.label + ": unknown column kind '" + kind + "' for '" + v.getName()
            + "' (the Python package and jvm-shim differ in version?)");
      }
    }
    writer = new RowWriter(vectors, inputOrdinals);
  }

  /** The non-plain columns of a finished batch of ``n`` rows (rows ``rows`` onwards of this task). */
  private void finishColumns(int n) {
    for (FieldVector v : root.getFieldVectors()) {
      String kind = spec.kinds.get(v.getName());
      if ("null".equals(kind)) {
        v.setInitialCapacity(n);
        v.allocateNew();
        v.setValueCount(n);
        if (v.getNullCount() != n) {
          throw new IllegalStateException(spec.label + ": column '" + v.getName() + "' is not all null");
        }
      } else if ("micros".equals(kind)) {
        BigIntVector micros = micro.remove(v.getName());
        try {
          toMillis(micros, (DateMilliVector) v, n);
        } finally {
          micros.close();
        }
      } else if (kind != null && kind.startsWith(COPY)) {
        sameValues(root.getVector(kind.substring(COPY.length())), v, n);
      }
    }
    root.setRowCount(n);
  }

  /**
   * Column {@code to} holds the values of {@code from} (a keyed node's id is its key): it takes
   * references to {@code from}'s buffers, which nothing writes to any more, instead of Spark
   * projecting the key twice into every row.
   */
  private void sameValues(FieldVector from, FieldVector to, int n) {
    if (from == null || !from.getField().getType().equals(to.getField().getType())) {
      throw new IllegalArgumentException(spec.label + ": column '" + to.getName() + "' cannot share the values of "
          + (from == null ? "a column not in the table" : "'" + from.getName() + "' (" + from.getField().getType() + ")"));
    }
    to.loadFieldBuffers(new ArrowFieldNode(n, from.getNullCount()), from.getFieldBuffers());
  }

  /** DateTime stores milliseconds: exact conversion, or the Python path's error for a finer value. */
  private void toMillis(BigIntVector micros, DateMilliVector out, int n) {
    out.allocateNew(n);
    for (int i = 0; i < n; i++) {
      if (micros.isNull(i)) {
        out.setNull(i);
        continue;
      }
      long us = micros.get(i);
      if (!ProjectedRow.wholeMillis(us)) {
        java.time.Instant at = java.time.Instant.ofEpochSecond(Math.floorDiv(us, 1_000_000L),
            Math.floorMod(us, 1_000_000L) * 1000L);
        throw new RowRules.RowRuleException(ErrorCodes.TYPE_MISMATCH, spec.label + " column '" + out.getName()
            + "' row " + (rows + i) + ": value '" + at + "' (timestamp[us]) has a sub-millisecond part; DateTime stores "
            + "milliseconds (" + spec.where + " " + partitionId + ")", spec.label, out.getName(), rows + i,
            "'" + at + "'");
      }
      out.set(i, ProjectedRow.millis(us));
    }
    out.setValueCount(n);
  }

  /** Close the batch being filled: apply the row rules, then queue it for the Lance thread. */
  private void flush() throws IOException {
    writer.finish();
    finishColumns(inBatch);
    VectorSchemaRoot ready = rules.apply(root, rows, allocator);
    if (ends != null) {
      ends.add(ready);
    }
    if (keys != null) {
      keys.add(ready);
    }
    if (fresh != null) {
      fresh.add(ready);
    }
    rows += ready.getRowCount();
    root = null;
    writer = null;
    inBatch = 0;
    ArrowRecordBatch batch;
    try {
      batch = new VectorUnloader(ready).getRecordBatch();
    } finally {
      ready.close(); // the batch holds its own references to the buffers
    }
    startLance();
    offer(batch);
  }

  private void offer(Object item) throws IOException {
    try {
      while (!queue.offer(item, 100, TimeUnit.MILLISECONDS)) {
        if (lanceError != null || !lance.isAlive()) {
          if (item instanceof ArrowRecordBatch) {
            ((ArrowRecordBatch) item).close();
          }
          throw new IOException(spec.label + ": the Lance writer stopped (" + spec.where + " " + partitionId + ")",
              lanceError);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while staging " + spec.tableKey, e);
    }
  }

  private void startLance() {
    if (lance != null) {
      return;
    }
    lance = new Thread(this::runLance, "omnigraph-stage-" + spec.tableKey + "-p" + partitionId);
    lance.setDaemon(true);
    lance.start();
  }

  /** The Lance thread: one streaming fragment write, in APPEND mode so field ids are the table's (I5). */
  private void runLance() {
    try (ArrowArrayStream stream = ArrowArrayStream.allocateNew(allocator)) {
      Data.exportArrayStream(allocator, new QueueReader(allocator, schema, queue), stream);
      org.lance.WriteFragmentBuilder b = Fragment.write()
          .datasetUri(spec.datasetUri)
          .allocator(allocator)
          .data(stream)
          .mode(WriteParams.WriteMode.APPEND)
          .dataStorageVersion(spec.dataStorageVersion)
          .maxRowsPerFile(spec.maxRowsPerFile);
      if (!spec.storageOptions.isEmpty()) {
        b = b.storageOptions(spec.storageOptions);
      }
      if (spec.maxBytesPerFile > 0) {
        b = b.maxBytesPerFile(spec.maxBytesPerFile);
      }
      written = b.execute();
    } catch (Throwable t) {
      lanceError = t;
    }
  }

  @Override
  public WriterCommitMessage commit() throws IOException {
    if (refused == null && inBatch > 0) {
      try {
        flush();
      } catch (RowRules.RowRuleException e) {
        refuse(e);
      }
    }
    if (refused != null) {
      return new LanceFragmentSink.RefusedMessage(partitionId, taskId, refused.toJson().toString());
    }
    if (lance != null) {
      offer(END); // Lance finishes the files while the set-aside values are probed
    }
    if (ends != null) {
      ends.finish();
    }
    if (fresh != null) {
      fresh.finish();
    }
    List<String> fragments = new ArrayList<>();
    long bytes = 0;
    List<String> files = new ArrayList<>();
    if (lance != null) {
      join();
      if (lanceError != null) {
        throw new IOException(spec.label + ": staging failed (" + spec.where + " " + partitionId + "): "
            + lanceError, lanceError);
      }
      for (FragmentMetadata f : written) {
        fragments.add(fragmentJson(f));
        for (DataFile d : f.getFiles()) {
          files.add(d.getPath());
          bytes += d.getFileSizeBytes() == null ? 0 : d.getFileSizeBytes();
        }
      }
      journal(files);
    }
    String keyFile = null;
    if (keys != null) { // beside the journal entries: the driver reads them, the journal's clean-up deletes them
      keyFile = journalFile("keys", ".bin");
      keys.writeTo(keyFile, spec.storageOptions);
    }
    long[] sketch = ends == null ? null : ends.sketch();
    String sketchFile = null;
    if (sketch != null) { // likewise
      sketchFile = journalFile("sketch", ".bin");
      SideFiles.writeLongs(sketchFile, sketch, sketch.length, spec.storageOptions);
    }
    return new StagedMessage(partitionId, taskId, rows, bytes, rules.givenIds(), fragments,
        ends == null ? -1 : ends.dangling(), ends == null ? -1 : ends.srcBound(), sketchFile, keyFile,
        fresh == null ? -1 : fresh.conflicts());
  }

  @Override
  public void abort() throws IOException {
    if (lance != null) {
      List<Object> dropped = new ArrayList<>();
      queue.drainTo(dropped);
      for (Object o : dropped) {
        if (o instanceof ArrowRecordBatch) {
          ((ArrowRecordBatch) o).close();
        }
      }
      queue.offer(FAILED);
      // a cancelled task arrives here interrupted: still wait for the Lance thread to stop, so
      // that a file it finished is known (and deleted) and the allocator is not closed under it
      boolean interrupted = Thread.interrupted();
      try {
        lance.join(ABORT_WAIT_MS);
      } catch (InterruptedException e) {
        interrupted = true;
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }
    deleteWritten();
  }

  /**
   * Delete the files the Lance writer finished (nothing references them); on an object store
   * journal them instead, for the Python driver to delete (the Lance SDK has no delete).
   */
  private void deleteWritten() throws IOException {
    if (written != null) {
      if (SideFiles.remote(spec.datasetUri)) {
        List<String> files = new ArrayList<>();
        for (FragmentMetadata f : written) {
          for (DataFile d : f.getFiles()) {
            files.add(d.getPath());
          }
        }
        journal(files);
      } else {
        for (FragmentMetadata f : written) {
          for (DataFile d : f.getFiles()) {
            Files.deleteIfExists(dataDir().resolve(d.getPath()));
          }
        }
      }
      written = null;
    }
  }

  @Override
  public void close() {
    if (root != null) {
      root.close();
    }
    micro.values().forEach(BigIntVector::close);
    micro.clear();
    for (Object o : queue) {
      if (o instanceof ArrowRecordBatch) {
        ((ArrowRecordBatch) o).close();
      }
    }
    queue.clear();
    if (lance != null && lance.isAlive()) { // never free memory the Lance writer may still read
      LOG.warn("{}: the Lance writer thread is still running at close; its memory is left to the GC",
          spec.tableKey);
      return;
    }
    try {
      allocator.close();
    } catch (IllegalStateException e) { // a leak report must not fail a task whose files are staged
      LOG.warn("{}: Arrow memory not released after staging: {}", spec.tableKey, e.getMessage());
    }
  }

  private void join() throws IOException {
    try {
      lance.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while staging " + spec.tableKey, e);
    }
  }

  private Path dataDir() {
    return Paths.get(spec.datasetUri).resolve("data"); // a local root (object stores journal instead)
  }

  /** Note this attempt's files where the Python driver finds them (it deletes what it does not commit). */
  private void journal(List<String> files) {
    ArrayNode entry = LanceSnapshotSource.JSON.createArrayNode();
    ObjectNode e = entry.addObject();
    e.put("table_key", spec.tableKey);
    e.put("stage_uri", spec.datasetUri);
    ArrayNode names = e.putArray("files");
    files.forEach(names::add);
    SideFiles.writeText(journalFile("jvm", ".json"), entry.toString(), spec.storageOptions);
  }

  /** A file of this attempt in the load's staging journal directory (unique per attempt; see {@link SideFiles}). */
  private String journalFile(String prefix, String ext) {
    return SideFiles.name(spec.journal, prefix + "-" + spec.tableKey.replace(':', '-') + "-p" + partitionId + "-t"
        + taskId + "-" + UUID.randomUUID().toString().substring(0, 8), ext);
  }

  /** The fragment as pylance's {@code FragmentMetadata.from_json} reads it. */
  private String fragmentJson(FragmentMetadata f) {
    if (f.getDeletionFile() != null || f.getRowIdMeta() != null) {
      throw new IllegalStateException(spec.label + ": a freshly staged fragment carries a deletion file or "
          + "row id metadata; the JVM write path does not hand those over");
    }
    ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
    o.put("id", f.getId());
    ArrayNode files = o.putArray("files");
    for (DataFile d : f.getFiles()) {
      ObjectNode df = files.addObject();
      df.put("path", d.getPath());
      ArrayNode fields = df.putArray("fields");
      for (int x : d.getFields()) {
        fields.add(x);
      }
      ArrayNode idx = df.putArray("column_indices");
      for (int x : d.getColumnIndices()) {
        idx.add(x);
      }
      df.put("file_major_version", d.getFileMajorVersion());
      df.put("file_minor_version", d.getFileMinorVersion());
      if (d.getFileSizeBytes() == null) {
        df.putNull("file_size_bytes");
      } else {
        df.put("file_size_bytes", d.getFileSizeBytes());
      }
      if (d.getBaseId().isPresent()) {
        df.put("base_id", d.getBaseId().get());
      } else {
        df.putNull("base_id");
      }
    }
    o.put("physical_rows", f.getPhysicalRows());
    o.putNull("deletion_file");
    o.putNull("row_id_meta");
    o.putNull("created_at_version_meta");
    o.putNull("last_updated_at_version_meta");
    return o.toString();
  }

  /** The stream Lance consumes: batches the task thread queues, until END (or FAILED: an error). */
  private static final class QueueReader extends ArrowReader {
    private final Schema schema;
    private final BlockingQueue<Object> queue;

    QueueReader(BufferAllocator allocator, Schema schema, BlockingQueue<Object> queue) {
      super(allocator);
      this.schema = schema;
      this.queue = queue;
    }

    @Override
    public boolean loadNextBatch() throws IOException {
      Object item;
      try {
        item = queue.take();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted", e);
      }
      if (item == END) {
        return false;
      }
      if (item == FAILED) {
        throw new IOException("the Spark task failed; staging abandoned");
      }
      try (ArrowRecordBatch batch = (ArrowRecordBatch) item) {
        new VectorLoader(getVectorSchemaRoot()).load(batch);
      }
      return true;
    }

    @Override
    public long bytesRead() {
      return 0;
    }

    @Override
    protected void closeReadSource() {}

    @Override
    protected Schema readSchema() {
      return schema;
    }
  }
}
