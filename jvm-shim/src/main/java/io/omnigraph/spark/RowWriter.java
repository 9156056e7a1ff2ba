package io.omnigraph.spark;

import java.util.List;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark rows into one batch's Arrow vectors, for the types the planner sends to the sink
 * ({@code jvm_write.plan_stage}: String, Bool, I32, I64, F32, F64, Date, microseconds as I64,
 * and lists of them).
 *
 * <p>Why not Spark's {@code ArrowWriter}: it wraps every string in a {@code ByteBuffer} and goes
 * through Arrow's general {@code setSafe} (hole filling, offset reads, checked copies) per value;
 * here a string is one bounds check and one memory copy, and every other value a plain store.
 * A vector of the wrong class for its Spark type cannot happen: the planner casts every column
 * to the table's type first.
 */
final class RowWriter {
  private final ColumnWriter[] columns;
  private final int[] inputs; // the input row's ordinal of each column
  private int count;

  /** Column {@code c} of each row goes to {@code vectors[c]}. */
  RowWriter(List<FieldVector> vectors) {
    this(vectors, null);
  }

  /**
   * Column {@code inputOrdinals[c]} of each row goes to {@code vectors[c]} (null: column {@code
   * c}). The provider's rows arrive in the DataFrame's column order, the table's columns are in
   * its own: reading each value where it is spares a reordered copy of every row.
   */
  RowWriter(List<FieldVector> vectors, int[] inputOrdinals) {
    columns = new ColumnWriter[vectors.size()];
    if (inputOrdinals != null && inputOrdinals.length != columns.length) {
      throw new IllegalArgumentException("row writer: " + inputOrdinals.length + " input ordinals for "
          + columns.length + " columns");
    }
    inputs = new int[columns.length];
    for (int i = 0; i < columns.length; i++) {
      inputs[i] = inputOrdinals == null ? i : inputOrdinals[i];
    }
    for (int i = 0; i < columns.length; i++) {
      FieldVector v = vectors.get(i);
      v.allocateNew();
      columns[i] = of(v);
    }
  }

  void write(InternalRow row) {
    for (int c = 0; c < columns.length; c++) {
      columns[c].write(row, inputs[c], count);
    }
    count++;
  }

  /** Set the vectors' value counts (the batch is then ready to hand on). */
  void finish() {
    for (ColumnWriter w : columns) {
      w.finish(count);
    }
  }

  private static ColumnWriter of(FieldVector v) {
    if (v instanceof VarCharVector) {
      return new Strings((VarCharVector) v);
    }
    if (v instanceof ListVector) {
      return new Lists((ListVector) v);
    }
    Fixed f = fixed(v);
    if (f != null) {
      return f;
    }
    throw new IllegalArgumentException("no row writer for column '" + v.getName() + "' (" + v.getField().getType() + ")");
  }

  /** One column: value ``ordinal`` of ``in`` becomes entry ``index`` of the vector. */
  abstract static class ColumnWriter {
    abstract void write(SpecializedGetters in, int ordinal, int index);

    abstract void finish(int count);
  }

  /** Sets bit {@code i} of the bitmap at {@code address} (validity, or a Bool's values). */
  static void setBit(long address, int i) {
    long at = address + (i >>> 3);
    Platform.putByte(null, at, (byte) (Platform.getByte(null, at) | (1 << (i & 7))));
  }

  /**
   * Strings: the value bytes are one copy, the offset and the validity bit plain stores. The
   * buffers' addresses and capacities are read once per reallocation, not per value: Arrow's
   * checked accessors verify the reference count and bounds on every call, which showed in the
   * profile of a load.
   */
  static final class Strings extends ColumnWriter {
    private final VarCharVector v;
    private long end; // bytes written so far
    private int capacity = -1; // values the validity and offset buffers hold
    private long validity;
    private long offsets;
    private long data;
    private long dataCapacity;

    Strings(VarCharVector v) {
      this.v = v;
    }

    private void refresh() {
      capacity = v.getValueCapacity();
      validity = v.getValidityBuffer().memoryAddress();
      offsets = v.getOffsetBuffer().memoryAddress();
      data = v.getDataBuffer().memoryAddress();
      dataCapacity = v.getDataBuffer().capacity();
    }

    @Override
    void write(SpecializedGetters in, int ordinal, int index) {
      if (index >= capacity) {
        while (index >= v.getValueCapacity()) {
          v.reallocValidityAndOffsetBuffers();
        }
        refresh();
      }
      if (!in.isNullAt(ordinal)) {
        UTF8String s = in.getUTF8String(ordinal);
        int len = s.numBytes();
        if (end + len > dataCapacity) {
          while (end + len > v.getDataBuffer().capacity()) {
            v.reallocDataBuffer();
          }
          refresh();
        }
        Platform.copyMemory(s.getBaseObject(), s.getBaseOffset(), null, data + end, len);
        end += len;
        setBit(validity, index);
      }
      Platform.putInt(null, offsets + 4L * (index + 1), (int) end); // a null is an empty slot
    }

    @Override
    void finish(int count) {
      v.setLastSet(count - 1); // every offset up to count is written: nothing to fill
      v.setValueCount(count);
    }
  }

  /**
   * Fixed-width values: a plain store of the value and its validity bit through addresses read
   * once per reallocation (see {@link Strings}); a null leaves its bit cleared.
   */
  abstract static class Fixed extends ColumnWriter {
    private final FieldVector v;
    private int capacity = -1;
    long validity;
    long values;

    Fixed(FieldVector v) {
      this.v = v;
    }

    @Override
    final void write(SpecializedGetters in, int ordinal, int index) {
      if (index >= capacity) {
        while (index >= v.getValueCapacity()) {
          v.reAlloc(); // the new part of each buffer is zeroed: no validity bit set
        }
        capacity = v.getValueCapacity();
        validity = v.getValidityBuffer().memoryAddress();
        values = v.getDataBuffer().memoryAddress();
      }
      if (!in.isNullAt(ordinal)) {
        store(in, ordinal, index);
        setBit(validity, index);
      }
    }

    /** Stores value ``ordinal`` of ``in`` at entry ``index`` (never null: the caller checked). */
    abstract void store(SpecializedGetters in, int ordinal, int index);

    @Override
    final void finish(int count) {
      v.setValueCount(count);
    }
  }

  /** The fixed-width writer of ``v`` (null: not a fixed-width type the planner sends). */
  private static Fixed fixed(FieldVector v) {
    if (v instanceof BigIntVector) {
      return new Fixed(v) {
        @Override
        void store(SpecializedGetters in, int ordinal, int index) {
          Platform.putLong(null, values + 8L * index, in.getLong(ordinal));
        }
      };
    }
    if (v instanceof IntVector || v instanceof DateDayVector) { // Date: days, an int in Spark and Arrow
      return new Fixed(v) {
        @Override
        void store(SpecializedGetters in, int ordinal, int index) {
          Platform.putInt(null, values + 4L * index, in.getInt(ordinal));
        }
      };
    }
    if (v instanceof Float8Vector) {
      return new Fixed(v) {
        @Override
        void store(SpecializedGetters in, int ordinal, int index) {
          Platform.putDouble(null, values + 8L * index, in.getDouble(ordinal));
        }
      };
    }
    if (v instanceof Float4Vector) {
      return new Fixed(v) {
        @Override
        void store(SpecializedGetters in, int ordinal, int index) {
          Platform.putFloat(null, values + 4L * index, in.getFloat(ordinal));
        }
      };
    }
    if (v instanceof BitVector) { // Bool: a bitmap of values beside the validity bitmap
      return new Fixed(v) {
        @Override
        void store(SpecializedGetters in, int ordinal, int index) {
          if (in.getBoolean(ordinal)) {
            setBit(values, index);
          }
        }
      };
    }
    return null;
  }

  static final class Lists extends ColumnWriter {
    private final ListVector v;
    private final ColumnWriter elements;
    private int next; // elements written so far

    Lists(ListVector v) {
      this.v = v;
      this.elements = of(v.getDataVector());
    }

    @Override
    void write(SpecializedGetters in, int ordinal, int index) {
      boolean isNull = in.isNullAt(ordinal);
      int start = v.startNewValue(index);
      int n = 0;
      if (!isNull) {
        ArrayData a = in.getArray(ordinal);
        n = a.numElements();
        for (int i = 0; i < n; i++) {
          elements.write(a, i, start + i);
        }
      }
      v.endValue(index, n);
      if (isNull) {
        v.setNull(index); // an empty slot, its validity bit cleared
      }
      next = start + n;
    }

    @Override
    void finish(int count) {
      elements.finish(next);
      v.setValueCount(count);
    }
  }
}
