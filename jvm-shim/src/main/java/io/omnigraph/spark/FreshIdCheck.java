package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * One task's share of an append's strict-insert check (invariant I17), done while it stages:
 * how many of the ids it stages are already ids of the committed table, probed against the
 * executor's {@link NodeIdIndex} of that table at its pinned version (the index the endpoint
 * checks use, kept across loads by the table's rows).
 *
 * <p>A proof, never a verdict: the driver skips its own anti-join only when every task found no
 * committed id against exactly the version it commits on; otherwise it runs the exact check,
 * which names the ids. An index that cannot be built makes this task report "not checked".
 * Until the index is ready the task keeps staging and sets the ids' bytes aside.
 */
final class FreshIdCheck {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(FreshIdCheck.class);
  /** set-aside ids above which the task waits for the index instead of copying more */
  private static final long MAX_PENDING_VALUES = 4_000_000;

  private final String label;
  private final NodeIdIndex.Pending committed;
  private final List<StringValues> pending = new ArrayList<>();
  private final NodeIdIndex.Probe probe = new NodeIdIndex.Probe();
  private long pendingValues;
  private long found;
  private boolean failed;

  /**
   * {@code spec}: {"load": token, "ids": source, "keep": where or absent}, see {@link
   * NodeIdIndex#of} and {@link NodeIdIndex.Kept}; the build starts now.
   */
  FreshIdCheck(JsonNode spec, String label, java.util.Map<String, String> storage) {
    this.label = label;
    this.committed = NodeIdIndex.of(spec.get("load").asText(), spec.get("ids"), storage,
        NodeIdIndex.Kept.of(spec.get("keep")));
  }

  /** Probe (or set aside) one batch's ids; the batch may be released afterwards. */
  void add(VectorSchemaRoot root) {
    if (failed) {
      return;
    }
    StringValues ids = new StringValues((VarCharVector) root.getVector("id"));
    pending.add(ids);
    pendingValues += ids.n;
    if (committed.isDone() || pendingValues > MAX_PENDING_VALUES) {
      drain();
    }
  }

  /** Probe everything set aside (waiting for the index); call before reading the result. */
  void finish() {
    if (!failed) {
      drain();
    }
  }

  private void drain() {
    NodeIdIndex index;
    try {
      index = committed.join();
    } catch (RuntimeException e) {
      LOG.warn("{}: committed ids not probed while staging (the driver checks them): {}", label, NodeIdIndex.cause(e));
      failed = true;
      pending.clear();
      return;
    }
    for (StringValues v : pending) {
      found += v.n - probe.misses(index, v.bytes, v.starts, v.lens, v.n, null);
    }
    pending.clear();
    pendingValues = 0;
  }

  /** Staged ids that are already committed; -1: not checked. */
  long conflicts() {
    return failed ? -1 : found;
  }
}
