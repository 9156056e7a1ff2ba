package io.omnigraph.spark;

import io.omnigraph.spark.LanceFragmentSink.ColumnRule;
import io.omnigraph.spark.LanceFragmentSink.WriteSpec;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BitVectorHelper;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.unsafe.Platform;

/**
 * The per-row rules of the JVM write path, applied to one converted Arrow batch: non-null
 * columns, enum membership, fresh ULIDs for null ids. The Python planner only sends a write here
 * when every other rule of the type is already guaranteed by the column types (widening casts),
 * so these are all the checks a row needs.
 *
 * <p>Messages match the Python path's word for word (rows numbered from 0 within the task, the
 * task named in parentheses), with the error code as a prefix the driver turns back into the typed
 * error.
 */
final class RowRules {
  /** ids minted per copy into a batch: a small reused buffer (a batch-sized one is a humongous G1 object per batch) */
  private static final int MINT_BLOCK = 1024;

  private final WriteSpec spec;
  private final String where;
  private final List<EnumValues> allowed = new ArrayList<>();
  private final Ulids.Mint ulids = new Ulids.Mint();
  private final byte[] mintBlock = new byte[Ulids.LENGTH * MINT_BLOCK];
  private long givenIds;

  RowRules(WriteSpec spec, String where) {
    this.spec = spec;
    this.where = where;
    for (ColumnRule r : spec.rules) {
      allowed.add(r.allowed == null ? null : new EnumValues(r.allowed));
    }
  }

  /** Ids that came from the input (not minted here), over every batch so far. */
  long givenIds() {
    return givenIds;
  }

  /** Check ``root`` (rows ``offset`` onwards of this task) and mint ids; may return a new root. */
  VectorSchemaRoot apply(VectorSchemaRoot root, long offset, BufferAllocator allocator) {
    for (int k = 0; k < spec.rules.size(); k++) {
      ColumnRule r = spec.rules.get(k);
      FieldVector v = root.getVector(r.column);
      if (r.notNull != null && v.getNullCount() > 0) {
        int i = firstNull(v);
        throw new RowRuleException(ErrorCodes.NULL_VIOLATION, spec.label + " column '" + r.column + "' row "
            + (offset + i) + ": non-nullable property '" + r.column + "' (" + r.notNull + ") is null (" + where + ")",
            spec.label, r.column, offset + i, null);
      }
      if (r.allowed != null) {
        checkEnum(r, allowed.get(k), v, offset);
      }
    }
    return spec.mintColumn == null ? root : mint(root, allocator);
  }

  private static int firstNull(FieldVector v) {
    for (int i = 0; i < v.getValueCount(); i++) {
      if (v.isNull(i)) {
        return i;
      }
    }
    return -1;
  }

  private void checkEnum(ColumnRule r, EnumValues ok, FieldVector v, long offset) {
    StringValues values = new StringValues((VarCharVector) v); // enums are scalar in the schema language
    for (int k = 0; k < values.n; k++) {
      if (!ok.contains(values.bytes, values.starts[k], values.lens[k])) {
        int i = values.nulls == 0 ? k : nthNonNull(v, k);
        String value = new String(values.bytes, values.starts[k], values.lens[k], StandardCharsets.UTF_8);
        throw new RowRuleException(ErrorCodes.CONSTRAINT_VIOLATION, spec.label + " column '" + r.column + "' row "
            + (offset + i) + ": invalid enum value " + pythonRepr(value) + " for " + spec.typeName + "." + r.column
            + " (expected: " + String.join(", ", r.allowed) + ") (" + where + ")",
            spec.label, r.column, offset + i, pythonRepr(value));
      }
    }
  }

  /** The row of the ``k``-th non-null value (only to word an error). */
  private static int nthNonNull(FieldVector v, int k) {
    for (int i = 0; i < v.getValueCount(); i++) {
      if (!v.isNull(i) && k-- == 0) {
        return i;
      }
    }
    return -1;
  }

  /**
   * An enum's allowed values as UTF-8 bytes, looked up without decoding each value to a String
   * (a String per value showed in a node load's profile). Few values: compared in turn,
   * length first; many: a hash set.
   */
  static final class EnumValues {
    private static final int LINEAR_MAX = 16;
    private final byte[][] values;
    private final Set<ByteBuffer> set;

    EnumValues(List<String> allowed) {
      values = new byte[allowed.size()][];
      for (int i = 0; i < values.length; i++) {
        values[i] = allowed.get(i).getBytes(StandardCharsets.UTF_8);
      }
      set = values.length <= LINEAR_MAX ? null : new HashSet<>();
      if (set != null) {
        for (byte[] b : values) {
          set.add(ByteBuffer.wrap(b));
        }
      }
    }

    boolean contains(byte[] bytes, int start, int len) {
      if (set != null) {
        return set.contains(ByteBuffer.wrap(bytes, start, len));
      }
      for (byte[] v : values) {
        if (v.length == len && Arrays.equals(v, 0, len, bytes, start, start + len)) {
          return true;
        }
      }
      return false;
    }
  }

  /** Replace null ids with fresh ULIDs (as the engine does for rows without an id). */
  private VectorSchemaRoot mint(VectorSchemaRoot root, BufferAllocator allocator) {
    VarCharVector ids = (VarCharVector) root.getVector(spec.mintColumn);
    int n = root.getRowCount();
    int missing = ids.getNullCount();
    givenIds += n - missing;
    if (missing == 0) {
      return root;
    }
    VarCharVector fresh = new VarCharVector(ids.getField(), allocator);
    long now = System.currentTimeMillis(); // one clock read per batch (a batch mints in milliseconds)
    if (missing == n) { // the usual case (no input ids): the ids' bytes copied a block at a time
      fresh.allocateNew((long) Ulids.LENGTH * n, n);
      long offsets = fresh.getOffsetBuffer().memoryAddress(); // sized for n + 1 offsets by allocateNew
      for (int i = 0; i <= n; i++) {
        Platform.putInt(null, offsets + (long) i * BaseVariableWidthVector.OFFSET_WIDTH, i * Ulids.LENGTH);
      }
      ArrowBuf data = fresh.getDataBuffer();
      for (int from = 0; from < n; from += MINT_BLOCK) {
        int m = Math.min(MINT_BLOCK, n - from);
        for (int j = 0; j < m; j++) {
          ulids.next(now, mintBlock, j * Ulids.LENGTH);
        }
        data.setBytes((long) from * Ulids.LENGTH, mintBlock, 0, (long) m * Ulids.LENGTH);
      }
      ArrowBuf valid = fresh.getValidityBuffer(); // every id valid: whole bytes at once, then the last bits
      valid.setOne(0, n >>> 3);
      for (int i = n & ~7; i < n; i++) {
        BitVectorHelper.setBit(valid, i);
      }
      fresh.setLastSet(n - 1);
    } else {
      fresh.allocateNew(32L * n, n); // setSafe grows it for longer given ids
      for (int i = 0; i < n; i++) {
        if (ids.isNull(i)) {
          ulids.next(now, mintBlock, 0);
          fresh.setSafe(i, mintBlock, 0, Ulids.LENGTH);
        } else {
          fresh.setSafe(i, ids.get(i));
        }
      }
    }
    fresh.setValueCount(n);
    List<FieldVector> vectors = new ArrayList<>(root.getFieldVectors());
    vectors.set(vectors.indexOf(ids), fresh);
    ids.close();
    return new VectorSchemaRoot(root.getSchema().getFields(), vectors, n);
  }

  /** Python's repr() of a str, so messages equal the Python path's ({@code 'x'}, {@code "it's"}). */
  static String pythonRepr(String s) {
    char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder b = new StringBuilder().append(quote);
    s.codePoints().forEach(c -> {
      if (c == quote || c == '\\') {
        b.append('\\').appendCodePoint(c);
      } else if (c == '\n') {
        b.append("\\n");
      } else if (c == '\r') {
        b.append("\\r");
      } else if (c == '\t') {
        b.append("\\t");
      } else if (c < 0x20 || c == 0x7f) {
        b.append(String.format("\\x%02x", c));
      } else {
        b.appendCodePoint(c);
      }
    });
    return b.append(quote).toString();
  }

  /**
   * A row that breaks a rule; the message starts with the connector's error code. The staging task
   * does not fail with it: it hands {@link #toJson} to the driver in place of its fragments
   * (omnigraph_spark/spark/bad_rows.py), so Spark neither logs nor retries a deterministic error.
   */
  static final class RowRuleException extends IllegalArgumentException {
    final String code;
    final String table; // "node Person"; null when not known
    final String column;
    final long row; // within the task; -1: not one row
    final String value; // Python's repr of the offending value; null: a null (or not one value)

    RowRuleException(String code, String message) {
      this(code, message, null, null, -1, null);
    }

    RowRuleException(String code, String message, String table, String column, long row, String value) {
      super("[" + code + "] " + message);
      this.code = code;
      this.table = table;
      this.column = column;
      this.row = row;
      this.value = value;
    }

    /** {code, message, rows: [{table, column, row, value}]}: what the driver raises the typed error from. */
    com.fasterxml.jackson.databind.node.ObjectNode toJson() {
      com.fasterxml.jackson.databind.node.ObjectNode o = LanceSnapshotSource.JSON.createObjectNode();
      o.put("code", code);
      o.put("message", getMessage());
      com.fasterxml.jackson.databind.node.ObjectNode r = o.putArray("rows").addObject();
      r.put("table", table);
      r.put("column", column);
      if (row >= 0) {
        r.put("row", row);
      } else {
        r.putNull("row");
      }
      r.put("value", value);
      return o;
    }
  }
}
