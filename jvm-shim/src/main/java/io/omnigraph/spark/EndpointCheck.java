package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * One task's share of an edge load's load-wide checks, done while it stages: how many rows have
 * a {@code src} or {@code dst} that is not a node id (against {@link NodeIdIndex}), and an upper
 * bound on the edges any one source has in this task (a one-row count-min sketch: a source's
 * count is at most its hash bucket's).
 *
 * <p>Both are proofs, never verdicts: the driver skips its endpoint check only when every task
 * found nothing dangling against the very id sources the snapshot still has, and its @card check
 * only when the summed bounds cannot exceed the maximum. Otherwise it runs the exact checks, which
 * name the offending rows. A source that cannot be read makes this task report "not checked".
 *
 * <p>The indexes build in the background; until they are ready the task keeps staging and sets
 * the batches' endpoint bytes aside (a copy of two string columns), probing them when the
 * indexes arrive.
 */
final class EndpointCheck {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(EndpointCheck.class);
  static final int BUCKETS = 1 << 18;
  /** set-aside endpoints above which the task waits for the indexes instead of copying more */
  private static final long MAX_PENDING_VALUES = 4_000_000;

  private final String label;
  private final NodeIdIndex.Pending from;
  private final NodeIdIndex.Pending to;
  private final int[] buckets = new int[BUCKETS];
  private final List<Ends> pending = new ArrayList<>();
  private final NodeIdIndex.Probe probe = new NodeIdIndex.Probe();
  private final long sketchMinEdges; // a task with at least this many edges hands its buckets over
  private long edges; // non-null sources counted in the buckets
  private long pendingValues;
  private long dangling;
  private boolean failed;

  /**
   * {@code spec}: {"load": token, "src": source, "dst": source, "keep": where or absent,
   * "sketchMinEdges": n or absent (never)}, see {@link NodeIdIndex#of}, {@link NodeIdIndex.Kept}
   * and {@link #sketch}; the builds start now.
   */
  EndpointCheck(JsonNode spec, String label, java.util.Map<String, String> storage) {
    this.label = label;
    this.sketchMinEdges = spec.hasNonNull("sketchMinEdges") ? spec.get("sketchMinEdges").asLong() : Long.MAX_VALUE;
    String load = spec.get("load").asText();
    NodeIdIndex.Kept kept = NodeIdIndex.Kept.of(spec.get("keep"));
    this.from = NodeIdIndex.of(load, spec.get("src"), storage, kept);
    this.to = NodeIdIndex.of(load, spec.get("dst"), storage, kept);
  }

  /** Check (or set aside) one batch's endpoints; the batch may be released afterwards. */
  void add(VectorSchemaRoot root) {
    if (failed) {
      return;
    }
    Ends e = new Ends(new StringValues((VarCharVector) root.getVector("src")),
        new StringValues((VarCharVector) root.getVector("dst")));
    dangling += e.src.nulls + e.dst.nulls;
    pending.add(e);
    pendingValues += e.src.n + e.dst.n;
    if ((from.isDone() && to.isDone()) || pendingValues > MAX_PENDING_VALUES) {
      drain();
    }
  }

  /** Probe everything set aside (waiting for the indexes); call before reading the results. */
  void finish() {
    if (!failed) {
      drain();
    }
  }

  private void drain() {
    NodeIdIndex f;
    NodeIdIndex t;
    try {
      f = from.join();
      t = to.join();
    } catch (RuntimeException e) {
      LOG.warn("{}: endpoints not checked while staging (the driver checks them): {}", label, NodeIdIndex.cause(e));
      failed = true;
      pending.clear();
      return;
    }
    for (Ends e : pending) {
      edges += e.src.n;
      dangling += probe.misses(f, e.src.bytes, e.src.starts, e.src.lens, e.src.n, buckets);
      dangling += probe.misses(t, e.dst.bytes, e.dst.starts, e.dst.lens, e.dst.n, null);
    }
    pending.clear();
    pendingValues = 0;
  }

  /** Rows with a missing or unknown endpoint; -1: not checked. */
  long dangling() {
    return failed ? -1 : dangling;
  }

  /** No source has more edges in this task than this; -1: not counted. */
  int srcBound() {
    if (failed) {
      return -1;
    }
    int max = 0;
    for (int c : buckets) {
      max = Math.max(max, c);
    }
    return max;
  }

  /**
   * The task's bucket counts, four 16-bit counts to a long (bucket 4i + k in bits 16k..16k+15),
   * a count of 65,535 or more as 65,535; null: not counted, or fewer than {@code sketchMinEdges}
   * edges (the driver then takes this task's {@link #srcBound} alone). Why: the bounds of many tasks add up
   * (the sum of each task's fullest bucket), while their buckets added bucket by bucket bound
   * every source too, and more tightly: at 75M edges in 13 tasks 429 against 616, so a load
   * proves {@code @card(0..1000)} up to about 200M edges instead of 120M (docs/invariants.md I15).
   */
  long[] sketch() {
    if (failed || edges < sketchMinEdges) {
      return null;
    }
    long[] packed = new long[BUCKETS / 4];
    for (int b = 0; b < BUCKETS; b++) {
      packed[b >>> 2] |= (long) Math.min(buckets[b], 0xFFFF) << (16 * (b & 3));
    }
    return packed;
  }

  private static final class Ends {
    final StringValues src;
    final StringValues dst;

    Ends(StringValues src, StringValues dst) {
      this.src = src;
      this.dst = dst;
    }
  }
}
