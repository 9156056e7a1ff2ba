package io.omnigraph.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.python.Py4JServer;
import org.apache.spark.sql.SparkSession;

/**
 * A write's SparkSession, lent to its planner ({@link PythonBridge}) for one commit, so that the
 * load-wide checks above option {@code distributedCheckRows} run as Spark jobs on the write's
 * own session, as {@code write_table} runs them on its driver, instead of in the planner's memory.
 *
 * <p>Nothing starts until the planner asks ({@code {"need": "spark"}} while it commits): then a
 * py4j gateway into this JVM (Spark's own {@link Py4JServer}: loopback only, a fresh secret, the
 * thread mode pyspark uses) starts, and the planner gets its port, its secret (over the
 * planner's stdin) and a token that {@link #session} turns into the session. {@link #close}
 * stops the gateway after the commit; a planner that attached is not reused. The same on a
 * Spark Connect server: the session is the client's, the gateway the server's.
 */
final class SparkGateway implements AutoCloseable {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(SparkGateway.class);

  /** the sessions lent now, by token; an entry lives from {@link #open} to {@link #close} */
  private static final ConcurrentHashMap<String, SparkSession> LENT = new ConcurrentHashMap<>();

  private final SparkSession session;
  private Py4JServer server;
  private String token;

  SparkGateway(SparkSession session) {
    this.session = session;
  }

  /** The session lent under {@code token} (called by the planner through the gateway). */
  public static SparkSession session(String token) {
    SparkSession s = LENT.get(token);
    if (s == null) {
      throw new IllegalStateException("no SparkSession is lent under this token (its commit has ended)");
    }
    return s;
  }

  /** Start the gateway (once) and answer the planner's {@code need}: port, secret, token. */
  synchronized ObjectNode open() {
    if (server == null) {
      Py4JServer s = new Py4JServer(session.sparkContext().getConf());
      s.start();
      token = UUID.randomUUID().toString();
      LENT.put(token, session);
      server = s;
      LOG.info("omnigraph planner attached to this driver through a gateway on port {} for its checks",
          s.getListeningPort());
    }
    ObjectNode reply = LanceSnapshotSource.JSON.createObjectNode();
    reply.put("port", server.getListeningPort());
    reply.put("secret", server.secret());
    reply.put("session", token);
    return reply;
  }

  /** Whether the planner attached: it is then closed after the commit, not reused. */
  synchronized boolean used() {
    return server != null;
  }

  @Override
  public synchronized void close() {
    if (server != null) {
      LENT.remove(token);
      server.shutdown();
      server = null;
    }
  }
}
