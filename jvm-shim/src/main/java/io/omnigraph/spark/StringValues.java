package io.omnigraph.spark;

import java.nio.ByteOrder;
import org.apache.arrow.vector.VarCharVector;

/**
 * The non-null values of an Arrow string column, copied out of Arrow memory with two bulk
 * copies (offsets, bytes): per-value accessors check bounds and reference counts on every call,
 * which showed in the profile of the endpoint probes. Shared by the endpoint check, the key
 * fingerprints and the node id index.
 */
final class StringValues {
  final byte[] bytes;
  final int[] starts;
  final int[] lens;
  final int n; // non-null values
  final int nulls;

  StringValues(VarCharVector v) {
    int rows = v.getValueCount();
    int[] offsets = new int[rows + 1];
    if (rows > 0) {
      v.getOffsetBuffer().nioBuffer(0, 4 * (rows + 1)).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(offsets);
    }
    int base = offsets[0];
    int size = offsets[rows] - base;
    bytes = new byte[size];
    v.getDataBuffer().getBytes(base, bytes, 0, size);
    boolean anyNull = v.getNullCount() > 0;
    starts = new int[rows];
    lens = new int[rows];
    int k = 0;
    for (int i = 0; i < rows; i++) {
      if (anyNull && v.isNull(i)) {
        continue;
      }
      starts[k] = offsets[i] - base;
      lens[k++] = offsets[i + 1] - offsets[i];
    }
    n = k;
    nulls = rows - k;
  }
}
