package io.omnigraph.spark;

import java.util.List;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.BitVectorHelper;
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
 * here a string is one bounds check and one memory copy. A vector of the wrong class for its
 * Spark type cannot happen: the planner casts every column to the table's type first.
 */
final class RowWriter {
  private final ColumnWriter[] columns;
  private int count;

  RowWriter(List<FieldVector> vectors) {
    columns = new ColumnWriter[vectors.size()];
    for (int i = 0; i < columns.length; i++) {
      FieldVector v = vectors.get(i);
      v.allocateNew();
      columns[i] = of(v);
    }
  }

  void write(InternalRow row) {
    for (int c = 0; c < columns.length; c++) {
      columns[c].write(row, c, count);
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

  static final class Strings extends ColumnWriter {
    private final VarCharVector v;
    private long end; // bytes written so far

    Strings(VarCharVector v) {
      this.v = v;
    }

    @Override
    void write(SpecializedGetters in, int ordinal, int index) {
      while (index >= v.getValueCapacity()) {
        v.reallocValidityAndOffsetBuffers();
      }
      if (!in.isNullAt(ordinal)) {
        UTF8String s = in.getUTF8String(ordinal);
        int len = s.numBytes();
        while (end + len > v.getDataBuffer().capacity()) {
          v.reallocDataBuffer();
        }
        Platform.copyMemory(s.getBaseObject(), s.getBaseOffset(), null, v.getDataBuffer().memoryAddress() + end, len);
        end += len;
        BitVectorHelper.setBit(v.getValidityBuffer(), index);
      }
      v.getOffsetBuffer().setInt(4L * (index + 1), (int) end); // a null is an empty slot
    }

    @Override
    void finish(int count) {
      v.setLastSet(count - 1); // every offset up to count is written: nothing to fill
      v.setValueCount(count);
    }
  }

  /** Stores value ``ordinal`` of ``in`` at entry ``index`` (never null: the caller checked). */
  @FunctionalInterface
  interface Setter {
    void set(SpecializedGetters in, int ordinal, int index);
  }

  /** Fixed-width values: Arrow's setSafe is already a plain store; nulls leave the bit cleared. */
  static final class Fixed extends ColumnWriter {
    private final FieldVector v;
    private final Setter setter;

    Fixed(FieldVector v, Setter setter) {
      this.v = v;
      this.setter = setter;
    }

    @Override
    void write(SpecializedGetters in, int ordinal, int index) {
      if (!in.isNullAt(ordinal)) {
        setter.set(in, ordinal, index);
      } else if (index >= v.getValueCapacity()) {
        v.reAlloc();
      }
    }

    @Override
    void finish(int count) {
      v.setValueCount(count);
    }
  }

  /** The fixed-width writer of ``v`` (null: not a fixed-width type the planner sends). */
  private static Fixed fixed(FieldVector v) {
    Setter set = null;
    if (v instanceof BigIntVector) {
      BigIntVector t = (BigIntVector) v;
      set = (in, o, i) -> t.setSafe(i, in.getLong(o));
    } else if (v instanceof IntVector) {
      IntVector t = (IntVector) v;
      set = (in, o, i) -> t.setSafe(i, in.getInt(o));
    } else if (v instanceof DateDayVector) {
      DateDayVector t = (DateDayVector) v;
      set = (in, o, i) -> t.setSafe(i, in.getInt(o));
    } else if (v instanceof Float8Vector) {
      Float8Vector t = (Float8Vector) v;
      set = (in, o, i) -> t.setSafe(i, in.getDouble(o));
    } else if (v instanceof Float4Vector) {
      Float4Vector t = (Float4Vector) v;
      set = (in, o, i) -> t.setSafe(i, in.getFloat(o));
    } else if (v instanceof BitVector) {
      BitVector t = (BitVector) v;
      set = (in, o, i) -> t.setSafe(i, in.getBoolean(o) ? 1 : 0);
    }
    return set == null ? null : new Fixed(v, set);
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
