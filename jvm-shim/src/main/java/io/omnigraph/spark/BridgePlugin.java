package io.omnigraph.spark;

import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Starts one {@code format("omnigraph")} planner ({@link PythonBridge}) while the driver starts,
 * so the first read or write finds it warm instead of paying a Python start and the imports of
 * lance and pyarrow (1.5-4 s) itself. In a background thread; a failure is only logged (the
 * first load then starts its planner and reports the problem). {@code spark.plugins}, set by
 * {@code omnigraph_spark.configure_spark} when the shim is on the driver's class path.
 */
public final class BridgePlugin implements SparkPlugin {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(BridgePlugin.class);

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        Thread t = new Thread(() -> {
          try {
            PythonBridge.prestart();
          } catch (RuntimeException e) {
            LOG.info("omnigraph planner not started ahead: {}", e.getMessage());
          }
        }, "omnigraph-planner-prestart");
        t.setDaemon(true);
        t.start();
        return Map.of();
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return null;
  }
}
