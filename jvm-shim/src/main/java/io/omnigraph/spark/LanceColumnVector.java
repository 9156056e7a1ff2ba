package io.omnigraph.spark;

import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark's {@link ArrowColumnVector} with direct reads of the values Spark asks for most.
 *
 * <p>Why: a full scan spends most of its task time in Spark turning columns into rows, one
 * accessor call per value. Spark's accessors read the validity bit on every value (twice for a
 * string: once for {@code isNullAt}, once inside the string read) and go through Arrow's checked
 * buffer reads. Here a batch column without nulls answers {@code isNullAt} from one field;
 * validity bits, fixed-width values, strings and list bounds are read from the buffers'
 * addresses, as Spark's own {@code OffHeapColumnVector} does (Arrow buffers are little-endian,
 * as are the platforms Lance ships for). Other types (Bool) keep Spark's accessors.
 *
 * <p>The addresses are taken once per batch: the vector is built per batch and Spark never
 * reads a batch after asking for the next one ({@link SnapshotReaderFactory.Reader}). The
 * planner only sends columns stored exactly as Spark reads them ({@code jvm_read.column_blockers}).
 */
final class LanceColumnVector extends ArrowColumnVector {
  private final boolean noNulls;
  private final long validity; // validity bitmap address (0: no nulls in this batch)
  private final long data; // value buffer address (0: use Spark's accessor)
  private final long offsets; // VarChar / List offsets buffer address (0: neither)
  private final LanceColumnVector elements; // a List column's values (null: not a list)

  LanceColumnVector(ValueVector v) {
    super(v);
    boolean some = v.getValueCount() > 0;
    this.noNulls = v.getNullCount() == 0;
    this.validity = some && !noNulls ? v.getValidityBuffer().memoryAddress() : 0L;
    // only the vectors whose Spark reads are a plain little-endian load, a UTF-8 slice or a slice
    // of a child vector
    boolean fixed = v instanceof IntVector || v instanceof BigIntVector || v instanceof Float4Vector
        || v instanceof Float8Vector || v instanceof DateDayVector;
    boolean strings = v instanceof VarCharVector;
    boolean list = v instanceof ListVector;
    this.data = some && (fixed || strings) ? v.getDataBuffer().memoryAddress() : 0L;
    this.offsets = some && (strings || list) ? v.getOffsetBuffer().memoryAddress() : 0L;
    this.elements = list ? new LanceColumnVector(((ListVector) v).getDataVector()) : null;
  }

  @Override
  public boolean hasNull() {
    return !noNulls;
  }

  @Override
  public int numNulls() {
    return noNulls ? 0 : super.numNulls();
  }

  @Override
  public boolean isNullAt(int rowId) {
    return validity != 0 && (Platform.getByte(null, validity + (rowId >> 3)) & (1 << (rowId & 7))) == 0;
  }

  @Override
  public int getInt(int rowId) {
    return data == 0 ? super.getInt(rowId) : Platform.getInt(null, data + 4L * rowId);
  }

  @Override
  public long getLong(int rowId) {
    return data == 0 ? super.getLong(rowId) : Platform.getLong(null, data + 8L * rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return data == 0 ? super.getFloat(rowId) : Platform.getFloat(null, data + 4L * rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return data == 0 ? super.getDouble(rowId) : Platform.getDouble(null, data + 8L * rowId);
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    if (offsets == 0) {
      return super.getUTF8String(rowId);
    }
    if (isNullAt(rowId)) {
      return null;
    }
    int start = offset(rowId);
    return UTF8String.fromAddress(null, data + start, offset(rowId + 1) - start);
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    if (elements == null || offsets == 0) {
      return super.getArray(rowId);
    }
    if (isNullAt(rowId)) {
      return null;
    }
    int start = offset(rowId);
    return new ColumnarArray(elements, start, offset(rowId + 1) - start);
  }

  /** Entry ``i`` of the offsets buffer (a string's first byte, a list's first element). */
  private int offset(int i) {
    return Platform.getInt(null, offsets + 4L * i);
  }

  @Override
  public void close() {
    if (elements != null) {
      elements.close();
    }
    super.close();
  }
}
