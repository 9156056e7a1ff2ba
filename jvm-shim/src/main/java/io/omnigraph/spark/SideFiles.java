package io.omnigraph.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.lance.file.LanceFileWriter;

/**
 * The small files the JVM write path leaves for the Python driver (the staging journal's
 * entries, the tasks' key fingerprints, the job's hand-off), on a local root or an object store.
 *
 * <p>Both sides must reach them: the executors write them, the Python driver (on Spark Connect
 * another machine than the Spark driver) reads them, so they live in the load's journal
 * directory under the graph root, the one place every process of a load reaches with the
 * graph's own credentials. On a local root they are plain files renamed into place. On an
 * object store (a URI: {@code s3://}, {@code gs://}, {@code az://}, ...) they are single-column
 * Lance files written with the graph's storage options through {@link LanceFileWriter} (the
 * Lance SDK is the shim's only object-store client); a Lance file is one object PUT at close,
 * so a reader sees all of it or nothing. The Python side reads them with pylance's
 * {@code LanceFileReader} ({@code omnigraph_spark.store.side_files}).
 */
final class SideFiles {
  static {
    LanceDispatcherGuard.install(); // before this class's first Lance call (its javadoc)
  }

  /** the file name suffix of a side file on an object store */
  static final String LANCE = ".lance";
  /** the one column of a text side file */
  static final String TEXT_COLUMN = "text";
  /** the one column of a fingerprint side file */
  static final String HASH_COLUMN = "hash";

  private SideFiles() {}

  /** Whether {@code location} is an object-store URI (else a local path). */
  static boolean remote(String location) {
    return location.contains("://");
  }

  /** {@code dir + "/" + name}: a URI joined as a string, a local path by the OS's rules. */
  static String join(String dir, String name) {
    if (remote(dir)) {
      return dir.endsWith("/") ? dir + name : dir + "/" + name;
    }
    return Paths.get(dir, name).toString();
  }

  /** Where a side file named {@code base + ext} goes: an object store's gets {@link #LANCE} appended. */
  static String name(String dir, String base, String ext) {
    return join(dir, remote(dir) ? base + ext + LANCE : base + ext);
  }

  /** Write {@code text} completely or not at all at {@code location} (from {@link #name}). */
  static void writeText(String location, String text, Map<String, String> storage) {
    if (!remote(location)) {
      LanceFragmentSink.writeAtomically(Paths.get(location), text);
      return;
    }
    try (BufferAllocator allocator = new RootAllocator();
         VarCharVector v = new VarCharVector(TEXT_COLUMN, allocator)) {
      v.allocateNew(1);
      v.setSafe(0, text.getBytes(StandardCharsets.UTF_8));
      v.setValueCount(1);
      writeColumn(location, v, allocator, storage);
    }
  }

  /** Write the first {@code n} of {@code values} as little-endian longs (local) or one Int64 column (object store). */
  static void writeLongs(String location, long[] values, int n, Map<String, String> storage) {
    if (!remote(location)) {
      java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(8 * n).order(java.nio.ByteOrder.LITTLE_ENDIAN);
      buf.asLongBuffer().put(values, 0, n);
      LanceFragmentSink.writeAtomically(Paths.get(location), buf.array());
      return;
    }
    try (BufferAllocator allocator = new RootAllocator();
         BigIntVector v = new BigIntVector(HASH_COLUMN, allocator)) {
      v.allocateNew(n);
      for (int i = 0; i < n; i++) {
        v.set(i, values[i]);
      }
      v.setValueCount(n);
      writeColumn(location, v, allocator, storage);
    }
  }

  private static void writeColumn(String location, FieldVector v, BufferAllocator allocator,
      Map<String, String> storage) {
    List<FieldVector> cols = Arrays.asList(v);
    try (VectorSchemaRoot root = new VectorSchemaRoot(cols);
         LanceFileWriter w = LanceFileWriter.open(location, allocator, null, storage)) {
      root.setRowCount(v.getValueCount());
      w.write(root);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write " + location, e);
    } catch (Exception e) { // LanceFileWriter.close() declares Exception
      throw new IllegalStateException("cannot write " + location + ": " + e.getMessage(), e);
    }
  }
}
