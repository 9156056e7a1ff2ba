package io.omnigraph.spark;

/**
 * Keeps a JVM whose Lance libraries are in Spark's class loader alive when Lance's native
 * library loads.
 *
 * <p>Loading {@code liblance_jni} (the first use of a Lance class in a JVM) starts a native
 * thread, Lance's async-scan dispatcher, that attaches itself to the JVM and looks up
 * {@code org.lance.ipc.AsyncScanner} with JNI {@code FindClass}. A thread with no Java frames
 * finds classes through the JVM's system class loader only. When the shim's libraries reach a
 * JVM through {@code spark.jars} / {@code spark.jars.packages} (a pip install's
 * {@code configure_spark}, {@code spark-submit --jars/--packages}, cluster JAR and Maven
 * libraries), they are in Spark's {@code MutableURLClassLoader}, not the system class path: the
 * lookup fails, the thread ends, and the {@code NoClassDefFoundError} it leaves reaches the
 * JVM's default uncaught-exception handler. In an executor that handler is Spark's, which stops
 * the executor (exit code 50) after its first Lance call. lance-core 7.0.0 (the newest on Maven
 * Central) has no way around that lookup: every JVM that loads Lance through Spark's loader
 * loses the dispatcher thread.
 *
 * <p>The shim never uses Lance's async scanner (the only user of that thread): its scans and
 * writes are Lance's blocking calls, which run on the calling thread. So before the first Lance
 * call of a JVM whose system class loader cannot see Lance ({@link #install}), the default
 * handler is wrapped: that one error, on a thread with no Java frames of its own, is logged at
 * WARN and the JVM goes on; every other uncaught exception goes to the handler that was there
 * (Spark's), or is printed as the JVM would print it. With Lance on the system class path
 * ({@code spark.executor.extraClassPath}) nothing is installed.
 *
 * <p>Each class that calls Lance runs {@link #install} in its static initializer, so it runs
 * before that class's first Lance call on every thread (the JVM initializes a class once, before
 * any use of it). Runs on the driver and on executors.
 */
final class LanceDispatcherGuard {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(LanceDispatcherGuard.class);
  /** the class Lance's dispatcher thread looks up, as JNI names it */
  static final String DISPATCHER_CLASS = "org/lance/ipc/AsyncScanner";

  private LanceDispatcherGuard() {}

  /** Wraps the default uncaught-exception handler once per JVM, if Lance's dispatcher will fail. */
  static void install() {
    Once.touch();
  }

  /** True while the handler is installed in this JVM (the dispatcher cannot load its class). */
  static boolean installed() {
    return Once.INSTALLED;
  }

  /** The JVM initializes this holder once, on first {@link #install}, under its class-init lock. */
  private static final class Once {
    static final boolean INSTALLED = installHandler();

    static void touch() {}
  }

  private static boolean installHandler() {
    if (ClassLoader.getSystemClassLoader().getResource(DISPATCHER_CLASS + ".class") != null) {
      return false; // Lance on the JVM's class path: the dispatcher finds its class
    }
    Thread.setDefaultUncaughtExceptionHandler(new Handler(Thread.getDefaultUncaughtExceptionHandler()));
    return true;
  }

  /**
   * The dispatcher's failed lookup: a {@code NoClassDefFoundError} for {@link #DISPATCHER_CLASS}
   * thrown by JNI {@code FindClass} on a native thread, so none of its frames is Java code
   * outside the JDK's class loading.
   */
  static boolean isDispatcherLookup(Throwable e) {
    if (!(e instanceof NoClassDefFoundError) || !DISPATCHER_CLASS.equals(e.getMessage())) {
      return false;
    }
    for (StackTraceElement f : e.getStackTrace()) {
      String c = f.getClassName();
      if (!c.startsWith("java.") && !c.startsWith("jdk.")) {
        return false;
      }
    }
    return true;
  }

  static final class Handler implements Thread.UncaughtExceptionHandler {
    private final Thread.UncaughtExceptionHandler previous;

    Handler(Thread.UncaughtExceptionHandler previous) {
      this.previous = previous;
    }

    @Override
    public void uncaughtException(Thread t, Throwable e) {
      if (isDispatcherLookup(e)) {
        LOG.warn("Lance's native async-scan dispatcher (thread {}) could not load {}: the Lance libraries are in "
            + "Spark's class loader (spark.jars / spark.jars.packages), not the JVM's class path. The connector "
            + "does not use Lance's async scanner; this JVM goes on.", t.getName(), DISPATCHER_CLASS);
        return;
      }
      if (previous != null) {
        previous.uncaughtException(t, e);
      } else { // what ThreadGroup.uncaughtException does without a default handler
        System.err.print("Exception in thread \"" + t.getName() + "\" ");
        e.printStackTrace(System.err);
      }
    }
  }
}
