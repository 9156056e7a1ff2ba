package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Spark work the planner ({@link PythonBridge}) hands back for the write's session to run: the
 * JVM executor of {@code omnigraph_spark/spark/work.py::SparkWork}. The planner never calls into
 * this JVM; while it commits it answers the pending request with {@code {"ok": {"run": [{"id",
 * "work"}, ...]}}}, and the provider runs each work here and sends {@code {"op": "ran",
 * "results": [...]}} (spec/bridge_protocol.json).
 *
 * <p>A work is views (each a read of {@code format("omnigraph")} with a given schema and the
 * reserved option {@link #SCAN_OPTION}: the Python source reads it, see
 * {@code omnigraph_spark/spark/scans.py}), cached views ({@code CACHE TABLE name AS sql}), and
 * Spark SQL queries whose result columns are strings, longs or booleans, returned as JSON rows;
 * or {@code merge_replace}: a {@link MergeReplace} spec, answered as one row holding its JSON.
 * Everything it registered is dropped afterwards; its jobs carry the work's tag.
 */
final class SparkWork {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(SparkWork.class);

  /** The reserved read option naming a check's scan (JSON). */
  static final String SCAN_OPTION = "__omnigraph_scan";
  /** The reserved read option holding a scan's Lance storage options; Spark redacts it. */
  static final String SECRETS_OPTION = "__omnigraph_scan_secrets";

  private SparkWork() {}

  /** Runs a piece of Spark work: the real one on a session, a scripted one in tests. */
  interface Runner {
    /** The answer's tables: per query, its rows as JSON arrays in column order. */
    ArrayNode run(JsonNode work) throws Exception;
  }

  /** The runner of {@code session}. */
  static Runner on(SparkSession session) {
    return work -> run(session, work);
  }

  /**
   * The {@code ran} request answering a {@code run} answer's works: each run on its own thread
   * (the planner's checks run concurrently), an error kept as that work's result.
   */
  static ObjectNode ran(JsonNode works, Runner runner) {
    int n = works.size();
    JsonNode[] results = new JsonNode[n];
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      final int k = i;
      JsonNode item = works.get(i);
      Thread t = new Thread(() -> results[k] = result(item, runner), "omnigraph-check-" + item.path("id").asText());
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while running the planner's Spark work", e);
      }
    }
    ObjectNode ran = LanceSnapshotSource.JSON.createObjectNode();
    ran.put("op", "ran");
    ArrayNode out = ran.putArray("results");
    for (JsonNode r : results) {
      out.add(r);
    }
    return ran;
  }

  private static JsonNode result(JsonNode item, Runner runner) {
    ObjectNode r = LanceSnapshotSource.JSON.createObjectNode();
    r.set("id", item.get("id"));
    try {
      if (runner == null) {
        throw new IllegalStateException("this request has no SparkSession to run Spark work on");
      }
      r.set("tables", runner.run(item.get("work")));
    } catch (Exception e) {
      ObjectNode error = r.putObject("error");
      error.put("class", e.getClass().getSimpleName());
      error.put("message", String.valueOf(e.getMessage()));
    }
    return r;
  }

  /** Run one work on {@code session}. */
  static ArrayNode run(SparkSession session, JsonNode work) throws Exception {
    String tag = work.path("tag").asText("omnigraph-load-check");
    session.sparkContext().addJobTag(tag);
    try {
      if (work.has("merge_replace")) {
        ArrayNode tables = LanceSnapshotSource.JSON.createArrayNode();
        tables.addArray().addArray().add(MergeReplace.run(session, work.get("merge_replace").toString()));
        return tables;
      }
      return queries(session, work);
    } finally {
      session.sparkContext().removeJobTag(tag);
    }
  }

  private static ArrayNode queries(SparkSession session, JsonNode work) {
    List<String> made = new ArrayList<>();
    List<String> cached = new ArrayList<>();
    int tasks = 4 * session.sparkContext().defaultParallelism();
    try {
      for (JsonNode v : work.path("views")) {
        ObjectNode scan = ((ObjectNode) v.get("scan")).deepCopy();
        if (!"inline".equals(scan.path("kind").asText()) && !scan.has("tasks")) {
          scan.put("tasks", tasks);
        }
        DataFrameReader reader = session.read().format(OmnigraphProvider.NAME)
            .schema((StructType) DataType.fromJson(v.get("schema").toString()))
            .option(SCAN_OPTION, scan.toString());
        if (v.hasNonNull("secrets")) {
          reader = reader.option(SECRETS_OPTION, v.get("secrets").toString());
        }
        String name = v.get("name").asText();
        reader.load().createOrReplaceTempView(name);
        made.add(name);
      }
      for (JsonNode c : work.path("cache")) {
        String name = c.get("name").asText();
        made.add(name);
        session.sql("CACHE TABLE " + name + " AS " + c.get("sql").asText());
        cached.add(name);
      }
      ArrayNode tables = LanceSnapshotSource.JSON.createArrayNode();
      for (JsonNode q : work.path("queries")) {
        tables.add(rows(session.sql(q.get("sql").asText()).collectAsList(), q.get("columns")));
      }
      return tables;
    } finally {
      for (String name : cached) {
        session.sql("UNCACHE TABLE IF EXISTS " + name);
      }
      for (String name : made) {
        session.catalog().dropTempView(name);
      }
    }
  }

  /**
   * {@code rows} as JSON arrays, each value as its column's declared kind ({@code [name,
   * kind]}: string, long or boolean) says; null stays null.
   */
  static ArrayNode rows(List<Row> rows, JsonNode columns) {
    ArrayNode out = LanceSnapshotSource.JSON.createArrayNode();
    for (Row row : rows) {
      ArrayNode values = out.addArray();
      for (int i = 0; i < columns.size(); i++) {
        Object v = row.get(i);
        String kind = columns.get(i).get(1).asText();
        if (v == null) {
          values.addNull();
          continue;
        }
        switch (kind) {
          case "string": values.add(v.toString()); break;
          case "long": values.add(((Number) v).longValue()); break;
          case "boolean": values.add((Boolean) v); break;
          default: throw new IllegalArgumentException("result column kind " + kind);
        }
      }
    }
    LOG.debug("omnigraph check query: {} rows", rows.size());
    return out;
  }
}
