package io.omnigraph.spark;

import java.time.LocalDate;
import java.util.Map;
import java.util.StringJoiner;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * Spark filters -> a Lance SQL filter for the JVM read path: the rules of the Python source's
 * translator (omnigraph_spark/spark/filters.py) for Spark's Java filter classes. Only columns
 * whose stored type compares in Lance exactly as in Spark are used (the driver names them and
 * their kinds: system, String, Bool, I32, I64, U32, U64, Date; never floats, lists or DateTime),
 * and only literals that render exactly. Strings are single-quoted with quotes doubled, LIKE
 * patterns escape {@code \ % _} with an explicit ESCAPE, dates are typed literals, column names
 * are backtick-quoted.
 *
 * <p>Why it is safe: the scan hands every filter back to Spark as well, so a pushed filter only
 * lets Lance skip rows Spark would drop anyway (late materialization of the other columns).
 */
final class FilterSql {
  private static final String ESCAPE = "\\";

  private FilterSql() {}

  /** The Lance SQL for {@code f}, or null when it must stay with Spark alone. */
  static String translate(Filter f, Map<String, String> kinds) {
    try {
      return sql(f, kinds);
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  private static String sql(Filter f, Map<String, String> kinds) {
    if (f instanceof EqualTo) {
      return cmp(((EqualTo) f).attribute(), "=", ((EqualTo) f).value(), kinds);
    }
    if (f instanceof GreaterThan) {
      return cmp(((GreaterThan) f).attribute(), ">", ((GreaterThan) f).value(), kinds);
    }
    if (f instanceof GreaterThanOrEqual) {
      return cmp(((GreaterThanOrEqual) f).attribute(), ">=", ((GreaterThanOrEqual) f).value(), kinds);
    }
    if (f instanceof LessThan) {
      return cmp(((LessThan) f).attribute(), "<", ((LessThan) f).value(), kinds);
    }
    if (f instanceof LessThanOrEqual) {
      return cmp(((LessThanOrEqual) f).attribute(), "<=", ((LessThanOrEqual) f).value(), kinds);
    }
    if (f instanceof EqualNullSafe) {
      EqualNullSafe e = (EqualNullSafe) f;
      String col = column(e.attribute(), kinds);
      if (e.value() == null) {
        return "(" + col + " IS NULL)";
      }
      // never NULL, so NOT(...) keeps Spark's null-safe meaning
      return "(" + col + " IS NOT NULL AND " + col + " = " + literal(e.value(), kinds.get(e.attribute())) + ")";
    }
    if (f instanceof In) {
      In in = (In) f;
      String col = column(in.attribute(), kinds);
      if (in.values().length == 0) {
        throw new IllegalArgumentException("empty IN");
      }
      StringJoiner values = new StringJoiner(", ", "(" + col + " IN (", "))");
      for (Object v : in.values()) {
        values.add(literal(v, kinds.get(in.attribute())));
      }
      return values.toString();
    }
    if (f instanceof IsNull) {
      return "(" + column(((IsNull) f).attribute(), kinds) + " IS NULL)";
    }
    if (f instanceof IsNotNull) {
      return "(" + column(((IsNotNull) f).attribute(), kinds) + " IS NOT NULL)";
    }
    if (f instanceof Not) {
      return "(NOT " + sql(((Not) f).child(), kinds) + ")";
    }
    if (f instanceof And) {
      return "(" + sql(((And) f).left(), kinds) + " AND " + sql(((And) f).right(), kinds) + ")";
    }
    if (f instanceof Or) {
      return "(" + sql(((Or) f).left(), kinds) + " OR " + sql(((Or) f).right(), kinds) + ")";
    }
    if (f instanceof StringStartsWith) {
      return like(((StringStartsWith) f).attribute(), escapeLike(((StringStartsWith) f).value()) + "%", kinds);
    }
    if (f instanceof StringEndsWith) {
      return like(((StringEndsWith) f).attribute(), "%" + escapeLike(((StringEndsWith) f).value()), kinds);
    }
    if (f instanceof StringContains) {
      return like(((StringContains) f).attribute(), "%" + escapeLike(((StringContains) f).value()) + "%", kinds);
    }
    throw new IllegalArgumentException(f.toString());
  }

  private static String cmp(String attribute, String op, Object value, Map<String, String> kinds) {
    return "(" + column(attribute, kinds) + " " + op + " " + literal(value, kinds.get(attribute)) + ")";
  }

  private static String like(String attribute, String pattern, Map<String, String> kinds) {
    String col = column(attribute, kinds);
    if (!isString(kinds.get(attribute))) {
      throw new IllegalArgumentException(attribute);
    }
    return "(" + col + " LIKE " + quote(pattern) + " ESCAPE " + quote(ESCAPE) + ")";
  }

  /** A pushable column's reference; names come from the catalog, anything odd is refused. */
  private static String column(String attribute, Map<String, String> kinds) {
    if (attribute == null || !kinds.containsKey(attribute) || attribute.isEmpty() || attribute.contains("`")) {
      throw new IllegalArgumentException(String.valueOf(attribute));
    }
    return "`" + attribute + "`";
  }

  private static boolean isString(String kind) {
    return "String".equals(kind) || "system".equals(kind);
  }

  /** A SQL literal for {@code v} against a column of {@code kind}; refuses what is not exact. */
  static String literal(Object v, String kind) {
    if (v == null || kind == null) {
      throw new IllegalArgumentException("null");
    }
    if (isString(kind)) {
      if (!(v instanceof String)) {
        throw new IllegalArgumentException(v.toString());
      }
      return quote((String) v);
    }
    switch (kind) {
      case "Bool":
        if (!(v instanceof Boolean)) {
          throw new IllegalArgumentException(v.toString());
        }
        return (Boolean) v ? "TRUE" : "FALSE";
      case "I32":
        return integer(v, Integer.MIN_VALUE, Integer.MAX_VALUE);
      case "I64":
        return integer(v, Long.MIN_VALUE, Long.MAX_VALUE);
      case "U32":
        return integer(v, 0, 0xFFFFFFFFL);
      case "U64": // what Lance SQL parses as a literal
        return integer(v, 0, Long.MAX_VALUE);
      case "Date":
        LocalDate d;
        if (v instanceof LocalDate) {
          d = (LocalDate) v;
        } else if (v instanceof java.sql.Date) {
          d = ((java.sql.Date) v).toLocalDate();
        } else {
          throw new IllegalArgumentException(v.toString());
        }
        if (d.getYear() < 1 || d.getYear() > 9999) {
          throw new IllegalArgumentException(d.toString());
        }
        return "date '" + d + "'";
      default:
        throw new IllegalArgumentException(kind);
    }
  }

  private static String integer(Object v, long lo, long hi) {
    if (!(v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte)) {
      throw new IllegalArgumentException(v.toString());
    }
    long n = ((Number) v).longValue();
    if (n < lo || n > hi) {
      throw new IllegalArgumentException(v.toString());
    }
    return Long.toString(n);
  }

  /**
   * A single-quoted SQL string. Refuses U+0000 and characters outside the Basic Multilingual
   * Plane (emoji, rarer CJK): the Lance SDK hands the filter to its native side as JNI's modified
   * UTF-8, which encodes those differently from UTF-8, and the native SQL parser rejects the
   * bytes ("invalid utf-8 sequence"). Such a filter stays with Spark, which evaluates it anyway.
   */
  static String quote(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == 0 || Character.isSurrogate(c)) {
        throw new IllegalArgumentException("a literal with U+0000 or a supplementary character");
      }
    }
    return "'" + s.replace("'", "''") + "'";
  }

  static String escapeLike(String s) {
    return s.replace(ESCAPE, ESCAPE + ESCAPE).replace("%", ESCAPE + "%").replace("_", ESCAPE + "_");
  }
}
