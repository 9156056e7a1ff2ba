package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarCharVector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The exact hash set of node ids the staging tasks probe (invariant I15): no false hit, no false miss. */
class NodeIdIndexTest {
  private final BufferAllocator allocator = new RootAllocator();

  @AfterEach
  void close() {
    allocator.close();
  }

  /** An index of {@code ids}, added in batches of {@code batch}, its layout decided by the first. */
  NodeIdIndex build(List<String> ids, int batch) {
    return build(ids, batch, NodeIdIndex.Builder.UNDECIDED);
  }

  NodeIdIndex build(List<String> ids, int batch, int layout) {
    NodeIdIndex.Builder b = new NodeIdIndex.Builder(ids.size(), layout);
    NodeIdIndex.Keys keys = new NodeIdIndex.Keys();
    for (int from = 0; from < ids.size(); from += batch) {
      try (VarCharVector v = Spec.varchar("id", ids.subList(from, Math.min(ids.size(), from + batch)), allocator)) {
        b.add(new StringValues(v), keys);
      }
    }
    return b.build();
  }

  /** Which of {@code values} the index holds. */
  boolean[] hits(NodeIdIndex index, List<String> values) {
    boolean[] hit = new boolean[values.size()];
    try (VarCharVector v = Spec.varchar("id", values, allocator)) {
      StringValues s = new StringValues(v);
      new NodeIdIndex.Probe().hits(index, s.bytes, s.starts, s.lens, s.n, hit);
      int[] buckets = new int[64];
      long misses = new NodeIdIndex.Probe().misses(index, s.bytes, s.starts, s.lens, s.n, buckets);
      int falses = 0;
      for (boolean h : hit) {
        falses += h ? 0 : 1;
      }
      assertEquals(falses, misses, "misses counts the values hits calls absent");
      assertEquals(s.n, Arrays.stream(buckets).sum(), "every value counted in one bucket");
    }
    return hit;
  }

  @Test
  void idsOfEveryLengthAroundTheInlineLimitAreFoundAndNearMissesAreNot() {
    List<String> ids = new ArrayList<>();
    List<String> near = new ArrayList<>();
    for (int len = 0; len <= 40; len++) {
      for (int k = 0; k < 5; k++) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < len; i++) {
          s.append((char) ('a' + (i * 7 + k) % 26));
        }
        ids.add(s.toString());
        if (len > 0) { // the same length, the last byte changed; one byte longer; one byte shorter
          near.add(s.substring(0, len - 1) + '#');
          near.add(s + "a");
        }
      }
    }
    near.add("\u0000");
    near.add("a\u0000");
    List<String> unique = new ArrayList<>(new java.util.LinkedHashSet<>(ids));
    near.removeAll(unique);
    NodeIdIndex index = build(unique, 37);
    assertEquals(unique.size(), index.size());
    assertFalse(index.ulids(), "not every id is a minted ULID: the byte layout");
    assertTrue(index.arena().length > 0, "ids above 15 bytes live in the arena");
    boolean[] hit = hits(index, unique);
    for (int i = 0; i < hit.length; i++) {
      assertTrue(hit[i], "'" + unique.get(i) + "' is indexed");
    }
    hit = hits(index, near);
    for (int i = 0; i < hit.length; i++) {
      assertFalse(hit[i], "'" + near.get(i) + "' is not indexed");
    }
  }

  @Test
  void mintedUlidsTakeUlidSlotsAndOtherTextsOfTheSameValueMiss() {
    List<String> ids = Arrays.asList(Ulids.countUp(0x0191E3B7C3A07E1AL, 0x5B6C7D8E9FA0B1C2L, 500));
    NodeIdIndex index = build(ids, 100);
    assertTrue(index.ulids());
    assertEquals(0, index.arena().length, "a ULID slot holds the id's 128 bits");
    boolean[] hit = hits(index, ids);
    for (boolean h : hit) {
      assertTrue(h);
    }
    List<String> others = new ArrayList<>();
    for (String id : ids.subList(0, 20)) {
      others.add(id.toLowerCase());
      others.add(id.replace('0', 'O'));
      others.add(id + " ");
    }
    others.add(Ulids.countUp(0x0191E3B7C3A07E1AL, 0x5B6C7D8E9FA0B1C2L, 501)[500]); // the next value
    others.removeAll(ids);
    for (boolean h : hits(index, others)) {
      assertFalse(h);
    }
  }

  @Test
  void anIdThatIsNoUlidAfterABatchOfUlidsNeedsTheByteLayout() {
    NodeIdIndex.Builder b = new NodeIdIndex.Builder(10, NodeIdIndex.Builder.UNDECIDED);
    NodeIdIndex.Keys keys = new NodeIdIndex.Keys();
    try (VarCharVector first = Spec.varchar("id", Arrays.asList(Ulids.countUp(1L << 20, 0, 3)), allocator);
         VarCharVector second = Spec.varchar("id", Arrays.asList("p1", "p2"), allocator)) {
      b.add(new StringValues(first), keys);
      assertEquals(NodeIdIndex.Builder.ULIDS, b.layout.get());
      assertThrows(NodeIdIndex.NotUlids.class, () -> b.add(new StringValues(second), keys));
    }
    List<String> mixed = new ArrayList<>(Arrays.asList(Ulids.countUp(1L << 20, 0, 3)));
    mixed.add("p1");
    mixed.add("p2");
    // what the build does on NotUlids: it starts again with the byte layout
    NodeIdIndex again = build(mixed, 3, NodeIdIndex.Builder.BYTES);
    assertFalse(again.ulids());
    assertThrows(NodeIdIndex.NotUlids.class, () -> build(mixed, 3));
    for (boolean h : hits(again, mixed)) {
      assertTrue(h);
    }
  }

  @Test
  void nullIdsAreSkipped() {
    NodeIdIndex index = build(Arrays.asList("a", null, "b", null), 4);
    assertEquals(2, index.size());
    assertTrue(hits(index, Arrays.asList("a", "b"))[1]);
  }

  @Test
  void aBuilderRefusesMoreIdsThanItWasSizedFor() {
    NodeIdIndex.Builder b = new NodeIdIndex.Builder(2, NodeIdIndex.Builder.UNDECIDED);
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      ids.add("id-" + i);
    }
    try (VarCharVector v = Spec.varchar("id", ids, allocator)) {
      IllegalStateException e = assertThrows(IllegalStateException.class,
          () -> b.add(new StringValues(v), new NodeIdIndex.Keys()));
      assertEquals("more node ids than the sources counted (10)", e.getMessage());
    }
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> new NodeIdIndex.Builder(1L << 31, NodeIdIndex.Builder.UNDECIDED));
    assertEquals("too many node ids to index in this executor (" + (1L << 31) + ")", e.getMessage());
  }

  @Test
  void aHashsHomeSlotIsInsideTheTable() {
    for (int cap : new int[] {2, 3, 1000, 1 << 30}) {
      for (long h : new long[] {0, -1, Long.MIN_VALUE, Long.MAX_VALUE, 0x123456789ABCDEFL}) {
        int s = NodeIdIndex.home(h, cap);
        assertTrue(s >= 0 && s < cap, cap + " " + h);
      }
    }
    assertEquals(0, NodeIdIndex.home(0, 1000));
    assertEquals(999, NodeIdIndex.home(-1, 1000));
  }

  @Test
  void theTableHasOnePointSixSlotsPerId() {
    NodeIdIndex index = build(Arrays.asList("a", "b", "c", "d", "e"), 5);
    assertEquals(8, index.capacity());
    assertEquals(16, index.slots().length);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
