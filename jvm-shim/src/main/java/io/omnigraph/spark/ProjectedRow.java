package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecificInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * An input row turned into the sink's row: the table's columns in order, each read from its input
 * column as given, with a widening conversion ({@code byte/short/int -> int/long},
 * {@code -> float/double}), a date or timestamp as microseconds, or a typed null. The Python
 * planner decides the mapping ({@code omnigraph_spark.spark.bridge.projection}); it is what
 * {@code jvm_write.projected}'s {@code selectExpr} does for {@code write_table}, applied per row
 * in the task, because a data source receives the query's rows as they are. One mutable row per
 * task, refilled for every input row (the sink copies each value out before the next); strings,
 * lists and other references are passed through, never copied.
 */
final class ProjectedRow {
  private static final long MICROS_PER_DAY = 86_400_000_000L;

  // what a column's value becomes (from the planner's "from"/"to")
  private static final int NULL = 0;
  private static final int AS_IS = 1; // a reference (string, list, ...) as given
  private static final int BOOL = 2;
  private static final int BYTE_TO_INT = 3;
  private static final int SHORT_TO_INT = 4;
  private static final int INT = 5; // int -> int, and a date (days) as given
  private static final int BYTE_TO_LONG = 6;
  private static final int SHORT_TO_LONG = 7;
  private static final int INT_TO_LONG = 8;
  private static final int LONG = 9; // long -> long, and a timestamp's microseconds (micros_ts)
  private static final int DATE_TO_MICROS = 10;
  private static final int BYTE_TO_FLOAT = 11;
  private static final int SHORT_TO_FLOAT = 12;
  private static final int FLOAT = 13;
  private static final int BYTE_TO_DOUBLE = 14;
  private static final int SHORT_TO_DOUBLE = 15;
  private static final int INT_TO_DOUBLE = 16;
  private static final int FLOAT_TO_DOUBLE = 17;
  private static final int DOUBLE = 18;
  private static final int BYTE = 19;
  private static final int SHORT = 20;

  /** The mapping, from the planner's JSON: small and serialisable, shipped with the writer factory. */
  static final class Mapping implements Serializable {
    final int[] ordinal; // input column, -1: a null column
    final int[] op;
    final DataType[] input; // the input column's type (AS_IS reads it by type)
    final StructType output; // the sink's row

    Mapping(JsonNode columns, StructType inputSchema) {
      int n = columns.size();
      ordinal = new int[n];
      op = new int[n];
      input = new DataType[n];
      StructType out = new StructType();
      for (int i = 0; i < n; i++) {
        JsonNode c = columns.get(i);
        ordinal[i] = c.get("ordinal").asInt();
        String from = c.get("from").asText();
        String to = c.get("to").asText();
        op[i] = op(from, to);
        input[i] = ordinal[i] < 0 ? DataTypes.NullType : inputSchema.fields()[ordinal[i]].dataType();
        out = out.add(c.get("column").asText(), outputType(op[i], input[i]), true);
      }
      output = out;
    }

    /**
     * The conversion of an input column read as {@code from} into {@code to}: exactly the pairs of
     * spec/type_widening.json's "jvm" list ({@code TypeWideningTest}), the identity ("same") and
     * the planner's null column; anything else is refused, never coerced.
     */
    private static int op(String from, String to) {
      switch (to) {
        case "null":
          return pick(from, to, new String[] {"null"}, NULL);
        case "micros_date":
          return pick(from, to, new String[] {"date"}, DATE_TO_MICROS);
        case "micros_ts":
          return pick(from, to, new String[] {"timestamp"}, LONG);
        case "same":
          switch (from) {
            case "bool": return BOOL;
            case "byte": return BYTE;
            case "short": return SHORT;
            case "int": case "date": return INT;
            case "long": case "timestamp": return LONG;
            case "float": return FLOAT;
            case "double": return DOUBLE;
            default: return AS_IS;
          }
        case "int":
          return pick(from, to, new String[] {"byte", "short", "int"}, BYTE_TO_INT, SHORT_TO_INT, INT);
        case "long":
          return pick(from, to, new String[] {"byte", "short", "int", "long"}, BYTE_TO_LONG, SHORT_TO_LONG,
              INT_TO_LONG, LONG);
        case "float":
          return pick(from, to, new String[] {"byte", "short", "float"}, BYTE_TO_FLOAT, SHORT_TO_FLOAT, FLOAT);
        case "double":
          return pick(from, to, new String[] {"byte", "short", "int", "float", "double"}, BYTE_TO_DOUBLE,
              SHORT_TO_DOUBLE, INT_TO_DOUBLE, FLOAT_TO_DOUBLE, DOUBLE);
        default:
          throw new IllegalArgumentException("projection: unknown conversion to '" + to + "'");
      }
    }

    private static int pick(String from, String to, String[] froms, int... ops) {
      for (int i = 0; i < froms.length; i++) {
        if (froms[i].equals(from)) {
          return ops[i];
        }
      }
      throw new IllegalArgumentException("projection: no conversion from '" + from + "' to '" + to + "'");
    }

    private static DataType outputType(int op, DataType input) {
      switch (op) {
        case NULL: return DataTypes.NullType;
        case BYTE_TO_INT: case SHORT_TO_INT: return DataTypes.IntegerType;
        case BYTE_TO_LONG: case SHORT_TO_LONG: case INT_TO_LONG: case DATE_TO_MICROS: case LONG:
          return DataTypes.LongType;
        case BYTE_TO_FLOAT: case SHORT_TO_FLOAT: return DataTypes.FloatType;
        case BYTE_TO_DOUBLE: case SHORT_TO_DOUBLE: case INT_TO_DOUBLE: case FLOAT_TO_DOUBLE:
          return DataTypes.DoubleType;
        default: return input;
      }
    }

    /**
     * The input ordinal of each of the sink's columns when every column is read as given (no
     * conversion, no null column), only in another order: the sink then reads the input rows
     * where the values are ({@link RowWriter}) instead of a refilled row per input row. Null:
     * some column is converted or null.
     */
    int[] reorder() {
      for (int i = 0; i < ordinal.length; i++) {
        if (ordinal[i] < 0 || op[i] == NULL || op[i] == DATE_TO_MICROS || !outputType(op[i], input[i]).equals(input[i])) {
          return null;
        }
      }
      return ordinal.clone();
    }

    /** The input rows are the sink's rows already (every column as given, in order). */
    boolean identity(int inputWidth) {
      if (ordinal.length != inputWidth) {
        return false;
      }
      for (int i = 0; i < ordinal.length; i++) {
        if (ordinal[i] != i || op[i] == NULL || op[i] == DATE_TO_MICROS || !outputType(op[i], input[i]).equals(input[i])) {
          return false;
        }
      }
      return true;
    }
  }

  /** Whether a DateTime given as Spark microseconds {@code us} is a whole millisecond (what it stores). */
  static boolean wholeMillis(long us) {
    return Math.floorMod(us, 1000L) == 0;
  }

  /** A DateTime's stored milliseconds for Spark microseconds {@code us} (exact when {@link #wholeMillis}). */
  static long millis(long us) {
    return Math.floorDiv(us, 1000L);
  }

  private final Mapping m;
  private final SpecificInternalRow out;

  ProjectedRow(Mapping m) {
    this.m = m;
    this.out = new SpecificInternalRow(m.output);
  }

  /** The sink's row for {@code row} (the same object every call, refilled). */
  InternalRow of(InternalRow row) {
    int[] ordinal = m.ordinal;
    int[] op = m.op;
    for (int i = 0; i < ordinal.length; i++) {
      int o = ordinal[i];
      if (o < 0 || row.isNullAt(o)) {
        out.setNullAt(i);
        continue;
      }
      switch (op[i]) {
        case AS_IS: out.update(i, row.get(o, m.input[i])); break;
        case BOOL: out.setBoolean(i, row.getBoolean(o)); break;
        case BYTE: out.setByte(i, row.getByte(o)); break;
        case SHORT: out.setShort(i, row.getShort(o)); break;
        case BYTE_TO_INT: out.setInt(i, row.getByte(o)); break;
        case SHORT_TO_INT: out.setInt(i, row.getShort(o)); break;
        case INT: out.setInt(i, row.getInt(o)); break;
        case BYTE_TO_LONG: out.setLong(i, row.getByte(o)); break;
        case SHORT_TO_LONG: out.setLong(i, row.getShort(o)); break;
        case INT_TO_LONG: out.setLong(i, row.getInt(o)); break;
        case LONG: out.setLong(i, row.getLong(o)); break;
        case DATE_TO_MICROS: out.setLong(i, row.getInt(o) * MICROS_PER_DAY); break; // UTC midnight, exact
        case BYTE_TO_FLOAT: out.setFloat(i, row.getByte(o)); break;
        case SHORT_TO_FLOAT: out.setFloat(i, row.getShort(o)); break;
        case FLOAT: out.setFloat(i, row.getFloat(o)); break;
        case BYTE_TO_DOUBLE: out.setDouble(i, row.getByte(o)); break;
        case SHORT_TO_DOUBLE: out.setDouble(i, row.getShort(o)); break;
        case INT_TO_DOUBLE: out.setDouble(i, row.getInt(o)); break;
        case FLOAT_TO_DOUBLE: out.setDouble(i, row.getFloat(o)); break;
        case DOUBLE: out.setDouble(i, row.getDouble(o)); break;
        default: out.setNullAt(i); // NULL
      }
    }
    return out;
  }
}
