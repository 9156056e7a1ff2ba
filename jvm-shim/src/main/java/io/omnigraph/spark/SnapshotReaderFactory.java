package io.omnigraph.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.lance.Dataset;
import org.lance.ipc.LanceScanner;
import org.lance.ipc.ScanOptions;

/** Executor side: each task opens the dataset at the pinned version and streams its fragments. */
final class SnapshotReaderFactory implements PartitionReaderFactory {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  /** Every table has an {@code id} column: scanned when Spark needs no column at all (count). */
  static final String ANY_COLUMN = "id";

  private final StructType schema;
  private final LanceSnapshotSource.ScanSpec spec;
  private final String filter; // pushed down (FilterSql), or null

  SnapshotReaderFactory(StructType schema, LanceSnapshotSource.ScanSpec spec, String filter) {
    this.schema = schema;
    this.spec = spec;
    this.filter = filter;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("columnar reads only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new Reader(schema, spec, (LanceSnapshotSource.PartitionSpec) partition, filter);
  }

  /** Streams Arrow batches; Spark consumes each batch before asking for the next one. */
  static final class Reader implements PartitionReader<ColumnarBatch> {
    private final BufferAllocator allocator = new RootAllocator();
    private final String[] names;
    private final Dataset dataset;
    private final LanceScanner scanner;
    private final ArrowReader batches;
    private ColumnarBatch current;

    Reader(StructType schema, LanceSnapshotSource.ScanSpec spec, LanceSnapshotSource.PartitionSpec part,
        String pushed) {
      this.names = schema.fieldNames();
      Dataset ds = null;
      LanceScanner sc = null;
      try {
        ds = LanceSnapshotSource.openAt(allocator, spec.path, spec.branch, spec.version, spec.storageOptions);
        List<String> columns = new ArrayList<>();
        for (StructField f : schema.fields()) {
          columns.add(f.name());
        }
        if (columns.isEmpty()) {
          columns.add(ANY_COLUMN);
        }
        ScanOptions.Builder b = new ScanOptions.Builder().fragmentIds(part.fragments).columns(columns)
            .batchSize(spec.batchSize);
        // the task's row range (if any) and the pushed filters (if any): both must hold
        String where = part.filter == null ? pushed
            : pushed == null ? part.filter : "(" + part.filter + ") AND " + pushed;
        if (where != null) {
          b.filter(where);
        }
        sc = LanceScanner.create(ds, b.build(), allocator);
        this.batches = sc.scanBatches();
      } catch (RuntimeException e) {
        closeQuietly(sc);
        if (ds != null) {
          ds.close();
        }
        allocator.close();
        throw e;
      }
      this.dataset = ds;
      this.scanner = sc;
    }

    @Override
    public boolean next() throws IOException {
      if (!batches.loadNextBatch()) {
        return false;
      }
      VectorSchemaRoot root = batches.getVectorSchemaRoot();
      ColumnVector[] vectors = new ColumnVector[names.length];
      for (int i = 0; i < names.length; i++) {  // by name: never trust the scan's column order
        vectors[i] = new LanceColumnVector(root.getVector(names[i]));
      }
      current = new ColumnarBatch(vectors, root.getRowCount());
      return true;
    }

    @Override
    public ColumnarBatch get() {
      return current;
    }

    @Override
    public void close() throws IOException {
      try {
        batches.close();
      } finally {
        closeQuietly(scanner);
        dataset.close();
        allocator.close();
      }
    }

    private static void closeQuietly(AutoCloseable c) {
      if (c == null) {
        return;
      }
      try {
        c.close();
      } catch (Exception e) {
        // nothing to add: the scan's own error (if any) is the one that matters
      }
    }
  }
}
