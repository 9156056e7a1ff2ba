package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.omnigraph.spark.PythonBridge.OmnigraphException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.junit.jupiter.api.Test;

/**
 * The JVM side of the planner's protocol: one JSON line per request and per answer
 * (spec/bridge_answers.json), and the Spark work a commit hands back (spec/bridge_protocol.json).
 */
class PythonBridgeTest {
  private static final JsonNode SPEC = Spec.load("bridge_answers.json");
  private static final JsonNode PROTOCOL = Spec.load("bridge_protocol.json");

  /** A planner process that has already written {@code answers} and records what it is sent. */
  static final class Scripted extends Process {
    final ByteArrayOutputStream sent = new ByteArrayOutputStream();
    private final InputStream out;
    boolean alive = true;

    Scripted(String answers) {
      out = new ByteArrayInputStream(answers.getBytes(StandardCharsets.UTF_8));
    }

    String sent() {
      return sent.toString(StandardCharsets.UTF_8);
    }

    @Override
    public OutputStream getOutputStream() {
      return sent;
    }

    @Override
    public InputStream getInputStream() {
      return out;
    }

    @Override
    public InputStream getErrorStream() {
      return InputStream.nullInputStream();
    }

    @Override
    public int waitFor() {
      alive = false;
      return 3;
    }

    @Override
    public boolean waitFor(long timeout, TimeUnit unit) {
      alive = false;
      return true;
    }

    @Override
    public int exitValue() {
      return 3;
    }

    @Override
    public void destroy() {
      alive = false;
    }

    @Override
    public boolean isAlive() {
      return alive;
    }
  }

  private static ObjectNode request(String op) {
    ObjectNode r = LanceSnapshotSource.JSON.createObjectNode();
    r.put("op", op);
    return r;
  }

  @Test
  void everyGoldenAnswerIsReturnedOrThrownAsTheProviderShowsIt() {
    for (JsonNode c : SPEC.get("answers")) {
      String name = c.get("name").asText();
      Scripted p = new Scripted(c.get("answer").toString() + "\n");
      try (PythonBridge bridge = new PythonBridge("python3", p)) {
        JsonNode jvm = c.get("jvm");
        if (jvm.has("ok")) {
          assertEquals(jvm.get("ok"), bridge.call(request("commit")), name);
          continue;
        }
        OmnigraphException e = assertThrows(OmnigraphException.class, () -> bridge.call(request("commit")), name);
        assertEquals(jvm.get("code").isNull() ? null : jvm.get("code").asText(), e.code, name);
        assertEquals(jvm.get("message").asText(), e.getMessage(), name);
        assertTrue(e instanceof IllegalArgumentException, "PySpark raises it as IllegalArgumentException");
      }
      assertEquals("{\"op\":\"commit\"}\n", p.sent(), name);
    }
  }

  /** The scripted runner of spec/bridge_protocol.json: each work gets its exchange's result. */
  private static SparkWork.Runner scriptedRunner(List<JsonNode> ran) {
    return work -> {
      ran.add(work);
      for (JsonNode x : PROTOCOL.get("exchanges")) {
        if (x.get("answer").get("ok").get("run").get(0).get("work").equals(work)) {
          JsonNode result = x.get("results").get("1");
          if (result.has("error")) {
            throw new IllegalStateException(result.get("error").get("message").asText());
          }
          return (ArrayNode) result.get("tables");
        }
      }
      throw new AssertionError("no exchange has this work: " + work);
    };
  }

  @Test
  void theCommitsSparkWorkIsRunHereAndItsRowsAreTheNextRequest() throws Exception {
    StringBuilder answers = new StringBuilder();
    for (JsonNode x : PROTOCOL.get("exchanges")) {
      answers.append(x.get("answer").toString()).append('\n');
    }
    answers.append(PROTOCOL.get("final").toString()).append('\n');
    Scripted p = new Scripted(answers.toString());
    List<JsonNode> ran = new ArrayList<>();
    try (PythonBridge bridge = new PythonBridge("python3", p)) {
      assertEquals(PROTOCOL.get("final").get("ok"), bridge.call((ObjectNode) PROTOCOL.get("request"), scriptedRunner(ran)));
    }
    String[] lines = p.sent().split("\n");
    assertEquals(1 + PROTOCOL.get("exchanges").size(), lines.length);
    assertEquals(PROTOCOL.get("request"), LanceSnapshotSource.JSON.readTree(lines[0]));
    for (int i = 0; i < PROTOCOL.get("exchanges").size(); i++) {
      JsonNode x = PROTOCOL.get("exchanges").get(i);
      assertEquals(x.get("ran"), LanceSnapshotSource.JSON.readTree(lines[i + 1]), x.get("name").asText());
      assertEquals(x.get("answer").get("ok").get("run").get(0).get("work"), ran.get(i));
    }
  }

  @Test
  void sparkWorkAskedOfARequestWithNoSessionIsAnsweredWithAnError() throws Exception {
    JsonNode x = PROTOCOL.get("exchanges").get(0);
    Scripted p = new Scripted(x.get("answer") + "\n{\"ok\": {\"removed\": 2}}\n");
    PythonBridge bridge = new PythonBridge("python3", p);
    assertEquals(2, bridge.call(request("abort")).get("removed").asInt());
    String[] lines = p.sent().split("\n");
    assertEquals(2, lines.length);
    JsonNode result = LanceSnapshotSource.JSON.readTree(lines[1]).get("results").get(0);
    assertEquals(1, result.get("id").asInt());
    assertEquals("IllegalStateException", result.get("error").get("class").asText());
    assertEquals("this request has no SparkSession to run Spark work on", result.get("error").get("message").asText());
    bridge.close();
  }

  @Test
  void resultRowsAreJsonOfTheirDeclaredKinds() {
    for (JsonNode c : PROTOCOL.get("rows")) {
      List<Row> rows = new ArrayList<>();
      for (JsonNode r : c.get("values")) {
        Object[] values = new Object[r.size()];
        for (int i = 0; i < r.size(); i++) {
          JsonNode v = r.get(i);
          values[i] = v.isNull() ? null : v.isTextual() ? v.asText() : v.isBoolean() ? (Object) v.asBoolean() : (Object) v.asLong();
        }
        rows.add(RowFactory.create(values));
      }
      assertEquals(c.get("json").toString(), SparkWork.rows(rows, c.get("columns")).toString(), c.get("name").asText());
    }
  }

  @Test
  void theReservedOptionsAreThePythonSources() {
    assertEquals(PROTOCOL.get("reserved_options").get("scan").asText(), SparkWork.SCAN_OPTION);
    assertEquals(PROTOCOL.get("reserved_options").get("secrets").asText(), SparkWork.SECRETS_OPTION);
  }

  @Test
  void aPlannerThatExitsOrAnswersWithNoJsonIsAnIllegalStateWithItsRemedy() {
    PythonBridge exited = new PythonBridge("/venv/bin/python", new Scripted(""));
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> exited.call(request("plan_read")));
    assertEquals("format(\"omnigraph\")'s planner `/venv/bin/python -m omnigraph_spark.spark.bridge` exited before "
        + "answering (exit code 3); its error is in the driver's log. Is omnigraph-spark installed in that "
        + "interpreter (spark.pyspark.python / PYSPARK_PYTHON)?", e.getMessage());

    PythonBridge garbled = new PythonBridge("python3", new Scripted("Traceback (most recent call last):\n"));
    e = assertThrows(IllegalStateException.class, () -> garbled.call(request("plan_read")));
    assertEquals("format(\"omnigraph\")'s planner answered with no JSON: Traceback (most recent call last):",
        e.getMessage());
  }

  @Test
  void aClosedPlannerIsNotAlive() {
    Scripted p = new Scripted("");
    PythonBridge bridge = new PythonBridge("python3", p);
    assertTrue(bridge.isAlive());
    bridge.close();
    bridge.close(); // idempotent
    assertTrue(bridge.isClosed());
    assertFalse(bridge.isAlive());
    assertFalse(p.alive, "closing reaps the process");
  }

  @Test
  void anErrorWithoutACodeKeepsItsMessage() {
    PythonBridge bridge = new PythonBridge("python3", new Scripted(
        "{\"error\": {\"code\": null, \"class\": \"KeyError\", \"message\": \"'options'\"}}\n"));
    OmnigraphException e = assertThrows(OmnigraphException.class, () -> bridge.call(request("plan_write")));
    assertNull(e.code);
    assertEquals("KeyError: 'options'", e.getMessage());
  }
}
