package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** ULIDs as the JVM mints them: python-ulid's text bit for bit (spec/ulids.json). */
class UlidsTest {
  private static final JsonNode SPEC = Spec.load("ulids.json");

  private static long[] words(String hex) {
    BigInteger v = new BigInteger(hex, 16);
    return new long[] {v.shiftRight(64).longValue(), v.longValue()};
  }

  @Test
  void theTextOfA128BitValueIsTheGoldenOne() {
    for (JsonNode c : SPEC.get("texts")) {
      long[] w = words(c.get("value").asText());
      assertEquals(c.get("text").asText(), Ulids.text(w[0], w[1]), c.toString());
    }
  }

  @Test
  void everyCharacterIsOfTheGoldenAlphabet() {
    String alphabet = SPEC.get("alphabet").asText();
    assertEquals(32, alphabet.length());
    for (int d = 0; d < 32; d++) { // the last digit alone: value d
      assertEquals(alphabet.charAt(d), Ulids.text(0, d).charAt(Ulids.LENGTH - 1));
    }
  }

  @Test
  void countingUpCarriesAsTheValueDoes() {
    for (JsonNode c : SPEC.get("count_up")) {
      long[] w = words(c.get("start").asText());
      assertArrayEquals(Spec.strings(c.get("texts")).toArray(new String[0]),
          Ulids.countUp(w[0], w[1], c.get("texts").size()), c.get("start").asText());
    }
  }

  @Test
  void aMintedTextReadsBackToItsBits() {
    long[] hi = new long[1];
    long[] lo = new long[1];
    for (JsonNode c : SPEC.get("texts")) {
      byte[] b = c.get("text").asText().getBytes(StandardCharsets.US_ASCII);
      assertTrue(Ulids.bits(b, 0, b.length, hi, lo, 0), c.toString());
      assertArrayEquals(words(c.get("value").asText()), new long[] {hi[0], lo[0]}, c.toString());
    }
  }

  @Test
  void aTextThatIsNoMintedUlidIsRefused() {
    long[] hi = {7};
    long[] lo = {9};
    for (JsonNode t : SPEC.get("not_minted").get("texts")) {
      byte[] b = t.asText().getBytes(StandardCharsets.UTF_8);
      assertFalse(Ulids.bits(b, 0, b.length, hi, lo, 0), t.asText());
      assertFalse(NodeIdIndex.ulidBits(b, 0, b.length, hi, lo, 0), t.asText());
    }
    assertArrayEquals(new long[] {7, 9}, new long[] {hi[0], lo[0]}, "a refused text writes no bits");
    // the all-zero ULID is a ULID but has no slot in an index (a zero word marks an empty slot)
    byte[] zero = "00000000000000000000000000".getBytes(StandardCharsets.US_ASCII);
    assertTrue(Ulids.bits(zero, 0, zero.length, hi, lo, 0));
    assertFalse(NodeIdIndex.ulidBits(zero, 0, zero.length, hi, lo, 0));
  }

  @Test
  void oneTasksIdsIncreaseAndCarryTheirMillisecond() {
    Ulids.Mint mint = new Ulids.Mint();
    long ms = 1_733_300_000_000L;
    byte[] out = new byte[Ulids.LENGTH * 3000];
    for (int i = 0; i < 3000; i++) {
      mint.next(i < 2000 ? ms : ms + 1, out, i * Ulids.LENGTH);
    }
    long[] hi = new long[1];
    long[] lo = new long[1];
    BigInteger before = null;
    for (int i = 0; i < 3000; i++) {
      assertTrue(Ulids.bits(out, i * Ulids.LENGTH, Ulids.LENGTH, hi, lo, 0));
      assertEquals(i < 2000 ? ms : ms + 1, hi[0] >>> 16, "the first 48 bits are the millisecond");
      BigInteger v = BigInteger.valueOf(hi[0]).shiftLeft(64).or(new BigInteger(Long.toUnsignedString(lo[0])));
      if (before != null && i != 2000) {
        assertEquals(before.add(BigInteger.ONE), v, "within a millisecond each id is the one before + 1");
      }
      if (i == 2000) {
        assertTrue(v.compareTo(before) > 0);
      }
      before = v;
    }
    assertEquals(0, (hi[0] >>> 15) & 1, "the random start keeps its top bit clear: 2^79 increments never overflow");
  }
}
