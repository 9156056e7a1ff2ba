package io.omnigraph.spark;

import java.util.Arrays;
import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;

/**
 * One task's fingerprints of a column whose non-null values must be distinct over the whole
 * load (a node type's single-column @key): a 64-bit hash per string value, the value itself per
 * integer. Equal values always have equal fingerprints, so if no two fingerprints of the load are
 * equal, no two values are: the driver then skips its own uniqueness pass (invariant I15). Equal
 * fingerprints prove nothing; the driver's exact check then decides and words any error.
 *
 * <p>A task writes its fingerprints sorted (unsigned), so the driver only merges the tasks' runs
 * instead of sorting the whole load: merging is several times cheaper than sorting, and the
 * tasks radix-sort their runs in parallel.
 */
final class KeyHashes {
  private final String column;
  private long[] values = new long[1 << 16];
  private int n;

  KeyHashes(String column) {
    this.column = column;
  }

  void add(org.apache.arrow.vector.VectorSchemaRoot root) {
    FieldVector v = root.getVector(column);
    int rows = v.getValueCount();
    if (n + rows > values.length) {
      values = Arrays.copyOf(values, Math.max(n + rows, 2 * values.length));
    }
    if (v instanceof VarCharVector) {
      StringValues s = new StringValues((VarCharVector) v);
      for (int i = 0; i < s.n; i++) {
        values[n++] = NodeIdIndex.hash(s.bytes, s.starts[i], s.lens[i]);
      }
    } else {
      BaseIntVector ints = (BaseIntVector) v;
      for (int i = 0; i < rows; i++) {
        if (!v.isNull(i)) {
          values[n++] = ints.getValueAsLong(i);
        }
      }
    }
  }

  /**
   * Write the fingerprints (ascending unsigned) to {@code location}, completely or not at all:
   * little-endian longs on a local root, one Int64 column on an object store ({@link SideFiles}).
   */
  void writeTo(String location, java.util.Map<String, String> storage) {
    sortUnsigned(values, n);
    SideFiles.writeLongs(location, values, n, storage);
  }

  /** Sort ``a[0, n)`` as unsigned longs: LSD radix, six passes of 11 bits (faster than a comparison sort). */
  static void sortUnsigned(long[] a, int n) {
    long[] src = a;
    long[] dst = new long[n];
    int[] start = new int[1 << 11];
    for (int shift = 0; shift < 64; shift += 11) {
      Arrays.fill(start, 0);
      for (int i = 0; i < n; i++) {
        start[(int) (src[i] >>> shift) & 2047]++;
      }
      for (int b = 0, sum = 0; b < start.length; b++) {
        int c = start[b];
        start[b] = sum;
        sum += c;
      }
      for (int i = 0; i < n; i++) {
        long v = src[i];
        dst[start[(int) (v >>> shift) & 2047]++] = v;
      }
      long[] t = src;
      src = dst;
      dst = t;
    }
    if (src != a) { // an odd number of passes ends in the scratch array (six do not)
      System.arraycopy(src, 0, a, 0, n);
    }
  }
}
