package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Key fingerprints (invariant I15): the hash both runtimes compute (spec/key_hashes.json), sorted unsigned. */
class KeyHashesTest {
  private static final JsonNode SPEC = Spec.load("key_hashes.json");

  @Test
  void stringHashesAreTheGoldenOnes() {
    for (JsonNode c : SPEC.get("strings")) {
      byte[] b = c.get("value").asText().getBytes(StandardCharsets.UTF_8);
      assertEquals(Spec.hex64(c.get("hash")), NodeIdIndex.hash(b, 0, b.length), c.toString());
      // the same bytes inside a larger array, at an offset: only [off, off + len) counts
      byte[] padded = new byte[b.length + 19];
      Arrays.fill(padded, (byte) 0x5A);
      System.arraycopy(b, 0, padded, 11, b.length);
      assertEquals(Spec.hex64(c.get("hash")), NodeIdIndex.hash(padded, 11, b.length), c.toString());
    }
  }

  @Test
  void aTasksFileHoldsEveryNonNullValuesFingerprintSortedUnsigned(@TempDir Path dir) throws Exception {
    List<String> values = new ArrayList<>();
    List<Long> want = new ArrayList<>();
    for (JsonNode c : SPEC.get("strings")) {
      values.add(c.get("value").asText());
      want.add(Spec.hex64(c.get("hash")));
      values.add(null);
    }
    want.sort(Long::compareUnsigned);
    assertEquals(want, written(dir, "k", Spec.varchar("k", values, new RootAllocator())));

    JsonNode ints = SPEC.get("integers");
    List<Long> wantInts = new ArrayList<>();
    com.fasterxml.jackson.databind.node.ArrayNode raw = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.arrayNode();
    for (JsonNode c : ints) {
      raw.add(c.get("value").asLong());
      raw.addNull();
      wantInts.add(Spec.hex64(c.get("hash")));
    }
    wantInts.sort(Long::compareUnsigned);
    assertEquals(wantInts, written(dir, "n", Spec.vector("n", raw, new RootAllocator())));
  }

  private static List<Long> written(Path dir, String column, FieldVector v) throws Exception {
    try (VectorSchemaRoot root = VectorSchemaRoot.of(v)) {
      root.setRowCount(v.getValueCount());
      KeyHashes k = new KeyHashes(column);
      k.add(root);
      k.add(root); // a second batch: equal values, equal fingerprints
      Path file = dir.resolve(column + ".bin");
      k.writeTo(file.toString(), Collections.emptyMap());
      ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
      List<Long> got = new ArrayList<>();
      while (b.hasRemaining()) {
        got.add(b.getLong());
      }
      List<Long> once = new ArrayList<>();
      for (int i = 0; i < got.size(); i += 2) {
        assertEquals(got.get(i), got.get(i + 1)); // each value twice, side by side
        once.add(got.get(i));
      }
      return once;
    }
  }

  @Test
  void theRadixSortOrdersAsUnsignedLongs() {
    Random r = new Random(42);
    for (int n : new int[] {0, 1, 2, 7, 2048, 100_003}) {
      long[] a = new long[n + 5];
      for (int i = 0; i < n; i++) {
        a[i] = switch (i % 4) {
          case 0 -> r.nextLong();
          case 1 -> -1L - r.nextInt(3); // the top of the unsigned range
          case 2 -> r.nextInt(5); // small, repeated
          default -> Long.MIN_VALUE + r.nextInt(3);
        };
      }
      long[] tail = Arrays.copyOfRange(a, n, n + 5);
      Long[] want = new Long[n];
      for (int i = 0; i < n; i++) {
        want[i] = a[i];
      }
      Arrays.sort(want, Long::compareUnsigned);
      KeyHashes.sortUnsigned(a, n);
      for (int i = 0; i < n; i++) {
        assertEquals((long) want[i], a[i], "n=" + n + " i=" + i);
      }
      assertArrayEquals(tail, Arrays.copyOfRange(a, n, n + 5), "past n nothing moves");
    }
  }
}
