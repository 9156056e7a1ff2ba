package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkEnv;

/**
 * The driver's conversation with this package's Python code ({@code omnigraph_spark.spark.bridge}):
 * a process started with the interpreter Spark's Python workers use, one JSON request per line on
 * its stdin, one answer per line on its stdout. The graph format, validation and the commit run
 * there, once, in Python; no py4j, so Spark Connect takes the same path. This side always asks
 * and the planner always answers; Spark work the planner needs comes back as an answer this side
 * runs ({@link #call(ObjectNode, SparkWork.Runner)}).
 *
 * <p>An answer is {@code {"ok": ...}} or {@code {"error": {"code", "class", "message"}}}; an error
 * is thrown as {@link OmnigraphException} whose message reads {@code Class: [CODE] message}, the
 * form {@code omnigraph_spark.unwrap_error} turns back into the typed Python error.
 */
final class PythonBridge implements AutoCloseable {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(PythonBridge.class);

  /** The module the process runs. */
  static final String MODULE = "omnigraph_spark.spark.bridge";

  private final String python;
  private final Process process;
  private final BufferedWriter requests;
  private final BufferedReader answers;
  private boolean closed;

  /** A planner on {@code process} (tests give it a scripted process). */
  PythonBridge(String python, Process process) {
    this.python = python;
    this.process = process;
    this.requests = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
    this.answers = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
  }

  /**
   * An error the Python side answered with (a typed {@code OmnigraphError} when {@code code} is
   * set). An {@link IllegalArgumentException}, so PySpark (classic and Connect) raises it as its
   * own {@code IllegalArgumentException} whose first line is this message, {@code [CODE] ...}
   * (a {@code Class: [CODE] ...} message loses its class prefix: the code comes first, as in the
   * Python API's messages), not py4j's "An error occurred while calling ...". The planner process
   * failing is an {@link IllegalStateException} instead.
   */
  static final class OmnigraphException extends IllegalArgumentException {
    private static final java.util.regex.Pattern CLASS_PREFIX =
        java.util.regex.Pattern.compile("^\\w+: (\\[[A-Z0-9_]+\\] )", java.util.regex.Pattern.DOTALL);

    final String code; // the connector's stable error code; null for a failure that is not one

    OmnigraphException(String code, String message) {
      super(codeFirst(code, message));
      this.code = code;
    }

    /** {@code message} starting with {@code [code] }: a {@code Class: } before it goes. */
    static String codeFirst(String code, String message) {
      if (code == null) {
        return message;
      }
      java.util.regex.Matcher m = CLASS_PREFIX.matcher(message);
      return m.lookingAt() && m.group(1).equals("[" + code + "] ") ? message.substring(m.start(1)) : message;
    }
  }

  /**
   * The interpreter Spark's Python workers use on this driver: {@code spark.pyspark.driver.python},
   * {@code spark.pyspark.python}, then the environment's {@code PYSPARK_DRIVER_PYTHON} and
   * {@code PYSPARK_PYTHON}, else {@code python3}. omnigraph-spark must be installed in it.
   */
  static String pythonExec() {
    SparkEnv env = SparkEnv.get();
    if (env != null) {
      for (String key : new String[] {"spark.pyspark.driver.python", "spark.pyspark.python"}) {
        String v = env.conf().get(key, null);
        if (v != null && !v.isBlank()) {
          return v;
        }
      }
    }
    for (String key : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
      String v = System.getenv(key);
      if (v != null && !v.isBlank()) {
        return v;
      }
    }
    return "python3";
  }

  /**
   * Idle planners of this JVM, most recently used first. Starting one costs a Python start and
   * the imports of lance and pyarrow (seconds); a planner holds no state between loads (a
   * write keeps it to itself from its plan to its commit), so reads and writes reuse them. An
   * idle planner exits by itself ({@code IDLE_SECONDS} in the bridge); {@link #acquire} skips it.
   */
  private static final ConcurrentLinkedDeque<PythonBridge> IDLE = new ConcurrentLinkedDeque<>();
  private static final int MAX_IDLE = 2;

  /** An idle planner of the same interpreter, or a new one. */
  static PythonBridge acquire() {
    String python = pythonExec();
    for (PythonBridge b = IDLE.pollFirst(); b != null; b = IDLE.pollFirst()) {
      if (b.python.equals(python) && b.isAlive()) {
        return b;
      }
      b.close();
    }
    return start();
  }

  /** Done with it: kept for the next load (up to {@code MAX_IDLE}), else closed. */
  void release() {
    if (isAlive() && IDLE.size() < MAX_IDLE) {
      IDLE.addFirst(this);
    } else {
      close();
    }
  }

  /** Start a planner ahead of the first load (the session's start, see {@link BridgePlugin}). */
  static void prestart() {
    if (IDLE.isEmpty()) {
      IDLE.addFirst(start());
    }
  }

  /**
   * {@code request} on an idle planner (or a new one); a planner that exited while idle is
   * replaced once. For the requests that change nothing (plans); {@code keep} true: the caller
   * keeps the planner (and releases or closes it), else it is released here.
   */
  static JsonNode ask(ObjectNode request, java.util.function.Consumer<PythonBridge> keep) {
    PythonBridge bridge = acquire();
    JsonNode answer;
    try {
      answer = bridge.call(request);
    } catch (IllegalStateException exited) {
      bridge.close();
      bridge = start();
      try {
        answer = bridge.call(request);
      } catch (RuntimeException e) {
        bridge.close();
        throw e;
      }
    } catch (RuntimeException e) {
      bridge.release(); // it answered: an error is an answer, the planner is fine
      throw e;
    }
    if (keep != null) {
      keep.accept(bridge);
    } else {
      bridge.release();
    }
    return answer;
  }

  static PythonBridge start() {
    String python = pythonExec();
    ProcessBuilder pb = new ProcessBuilder(python, "-m", MODULE);
    pb.redirectError(ProcessBuilder.Redirect.INHERIT); // its log lines go where the driver's go
    pb.environment().put("PYTHONUNBUFFERED", "1");
    try {
      return new PythonBridge(python, pb.start());
    } catch (IOException e) {
      throw new IllegalStateException("format(\"omnigraph\") cannot start its planner, `" + python + " -m "
          + MODULE + "`: " + e.getMessage() + " (set spark.pyspark.python or PYSPARK_PYTHON to an interpreter "
          + "with omnigraph-spark installed)");
    }
  }

  /** Send one request and return its {@code ok} answer; a Python error is thrown as OmnigraphException. */
  JsonNode call(ObjectNode request) {
    return call(request, null);
  }

  /**
   * {@link #call(ObjectNode)} for a request whose answer may first be Spark work: while the
   * planner commits, it answers {@code {"ok": {"run": [{"id", "work"}, ...]}}} (checks above
   * option {@code distributedCheckRows}); {@code runner} runs them on the write's session
   * ({@link SparkWork}) and the results go back as the next request, {@code {"op": "ran"}},
   * until the final answer. The planner never calls into this JVM. A null runner answers each
   * work with an error.
   */
  JsonNode call(ObjectNode request, SparkWork.Runner runner) {
    send(request);
    JsonNode answer = receive();
    while (answer.path("ok").has("run")) {
      send(SparkWork.ran(answer.get("ok").get("run"), runner));
      answer = receive();
    }
    JsonNode error = answer.get("error");
    if (error != null) {
      String code = error.hasNonNull("code") ? error.get("code").asText() : null;
      String message = error.get("message").asText();
      String cls = error.get("class").asText();
      throw new OmnigraphException(code, message.startsWith(cls + ":") ? message : cls + ": " + message);
    }
    return answer.get("ok");
  }

  private void send(ObjectNode message) {
    try {
      requests.write(message.toString());
      requests.write('\n');
      requests.flush();
    } catch (IOException e) {
      // the planner exited: receive() reports it
    }
  }

  private JsonNode receive() {
    String line;
    try {
      line = answers.readLine();
    } catch (IOException e) {
      line = null;
    }
    if (line == null) {
      throw new IllegalStateException("format(\"omnigraph\")'s planner `" + python + " -m " + MODULE
          + "` exited before answering (" + exitStatus() + "); its error is in the driver's log. Is "
          + "omnigraph-spark installed in that interpreter (spark.pyspark.python / PYSPARK_PYTHON)?");
    }
    try {
      return LanceSnapshotSource.JSON.readTree(line);
    } catch (IOException e) {
      throw new IllegalStateException("format(\"omnigraph\")'s planner answered with no JSON: " + line);
    }
  }

  private String exitStatus() {
    try {
      if (process.waitFor(5, TimeUnit.SECONDS)) {
        return "exit code " + process.exitValue();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return "still running";
  }

  /** Close its stdin (the process exits when it has answered everything) and reap it. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      requests.close();
    } catch (IOException e) {
      LOG.debug("closing the planner's stdin: {}", e.toString());
    }
    try {
      if (!process.waitFor(60, TimeUnit.SECONDS)) {
        LOG.warn("omnigraph planner {} did not exit within 60 s of its last request: killed", process.pid());
        process.destroyForcibly();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
    }
  }

  boolean isClosed() {
    return closed;
  }

  boolean isAlive() {
    return !closed && process.isAlive();
  }
}
