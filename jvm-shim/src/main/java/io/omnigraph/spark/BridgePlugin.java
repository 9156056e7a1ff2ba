package io.omnigraph.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The shim's Spark plugin, set as {@code spark.plugins} by {@code
 * omnigraph_spark.configure_spark}. An executor of a cluster loads Lance's native library ahead
 * as it starts ({@link #executorPlugin}). While the driver starts it
 *
 * <ul>
 *   <li>starts one {@code format("omnigraph")} planner ({@link PythonBridge}), so the first read
 *       or write finds it warm instead of paying a Python start and the imports of lance and
 *       pyarrow (seconds) itself. In a background thread; a failure is only logged (the first
 *       load then starts its planner and reports the problem);
 *   <li>with a local master, whose executor is this JVM, loads Lance's native library
 *       ({@link #loadLance}) in another background thread, so that the first staging task or
 *       scan does not wait for it;
 *   <li>ships to the executors the jars {@code spark-submit} resolved for {@code
 *       spark.jars.packages} that the session's {@code spark.jars} no longer lists ({@link
 *       #droppedJars}). A Python session built with {@code SparkSession.builder} starts its JVM
 *       through {@code spark-submit}, which resolves the packages and adds their jars to {@code
 *       spark.jars} (and the driver's class loader); pyspark then sets the builder's own
 *       settings on the new context, {@code spark.jars} too, so the context's list is the
 *       builder's again: the driver has the Lance libraries, the executors would get only the
 *       shim jar. {@code SparkContext.addJar} ships the dropped jars to the executors like the
 *       listed ones (not with a local master: its executor is the driver's JVM).
 * </ul>
 */
public final class BridgePlugin implements SparkPlugin {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(BridgePlugin.class);
  /** milliseconds {@link #loadLance} took in this JVM; -1: it has not finished (or not run) */
  private static volatile long lanceAheadMillis = -1;
  /** whether this JVM started loading Lance ahead (a local master runs both plugins in one JVM) */
  private static final java.util.concurrent.atomic.AtomicBoolean LANCE_AHEAD =
      new java.util.concurrent.atomic.AtomicBoolean();

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        // a local master's executor is this JVM, whose class loader has every resolved jar
        List<String> dropped = sc.isLocal() ? List.of()
            : droppedJars(System.getProperty("spark.jars", ""), sc.getConf().get("spark.jars", ""));
        for (String jar : dropped) {
          sc.addJar(jar);
        }
        if (!dropped.isEmpty()) {
          LOG.info("shipping {} jars spark-submit resolved that spark.jars no longer lists: {}", dropped.size(), dropped);
        }
        Thread t = new Thread(() -> {
          try {
            PythonBridge.prestart();
          } catch (RuntimeException e) {
            LOG.info("omnigraph planner not started ahead: {}", e.getMessage());
          }
        }, "omnigraph-planner-prestart");
        t.setDaemon(true);
        t.start();
        if (sc.isLocal()) { // its executors are this JVM
          loadLanceAhead();
        }
        return Map.of();
      }
    };
  }

  /** Starts {@link #loadLance} in a background thread, once per JVM. */
  static void loadLanceAhead() {
    if (LANCE_AHEAD.compareAndSet(false, true)) {
      Thread lance = new Thread(BridgePlugin::loadLance, "omnigraph-lance-preload");
      lance.setDaemon(true);
      lance.start();
    }
  }

  /**
   * Loads Lance's native library into this JVM. Lance's loader copies the 181 MB library out of
   * the lance-core jar into a temporary file (inflating it) and loads that, once per JVM: seconds
   * of CPU that the first staging task or scan otherwise waits for.
   * A failure is only logged: the first Lance call then loads it and reports the problem.
   */
  static void loadLance() {
    try {
      LanceDispatcherGuard.install(); // before this JVM's first Lance call (its javadoc)
      long t0 = System.nanoTime();
      org.lance.JniLoader.ensureLoaded();
      lanceAheadMillis = (System.nanoTime() - t0) / 1_000_000;
      LOG.debug("Lance's native library loaded ahead in {} ms", lanceAheadMillis);
    } catch (Throwable e) { // LinkageError too: a missing Lance jar is the first load's to report
      LOG.info("Lance's native library not loaded ahead: {}", e.toString());
    }
  }

  /** How long loading Lance ahead took in this JVM, in ms; -1 until it finished (tests). */
  public static long lanceLoadedAheadMillis() {
    return lanceAheadMillis;
  }

  /**
   * An executor of a cluster loads Lance's native library ahead as it starts, for the same
   * reason as the driver of a local master: its first staging task or scan would wait for it.
   * Spark starts an executor's plugins after it fetched the application's jars ({@code
   * spark.jars}), so Lance is loadable here on every route the driver's plugin serves.
   */
  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        loadLanceAhead();
      }
    };
  }

  /**
   * The entries of {@code submitted} (spark-submit's {@code spark.jars}: the JVM's system
   * property) whose file name no entry of {@code session} (the context's {@code spark.jars})
   * has, in order. Both are comma-separated paths or URIs.
   */
  static List<String> droppedJars(String submitted, String session) {
    Set<String> listed = new HashSet<>();
    for (String jar : session.split(",")) {
      if (!jar.isBlank()) {
        listed.add(fileName(jar));
      }
    }
    List<String> dropped = new ArrayList<>();
    for (String jar : submitted.split(",")) {
      if (!jar.isBlank() && listed.add(fileName(jar))) {
        dropped.add(jar.trim());
      }
    }
    return dropped;
  }

  private static String fileName(String jar) {
    String s = jar.trim();
    return s.substring(s.lastIndexOf('/') + 1);
  }
}
