package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.omnigraph.spark.PythonBridge.OmnigraphException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The JVM side of the planner's protocol: one JSON line per request and per answer (spec/bridge_answers.json). */
class PythonBridgeTest {
  private static final JsonNode SPEC = Spec.load("bridge_answers.json");

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

  @Test
  void aRequestForTheSessionIsRefusedWhenTheRequestHasNone() throws Exception {
    Scripted p = new Scripted("{\"need\": \"spark\"}\n{\"ok\": {\"removed\": 2}}\n");
    PythonBridge bridge = new PythonBridge("python3", p);
    assertEquals(2, bridge.call(request("abort")).get("removed").asInt());
    String[] lines = p.sent().split("\n");
    assertEquals(2, lines.length);
    assertEquals("abort", LanceSnapshotSource.JSON.readTree(lines[0]).get("op").asText());
    assertEquals("this request has no SparkSession to lend",
        LanceSnapshotSource.JSON.readTree(lines[1]).get("refused").asText());
    bridge.close();
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
