package io.omnigraph.spark;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;

/**
 * ULIDs as the JVM write path mints them: 48 bits of milliseconds and 80 bits counting up from a
 * random start (see {@link Mint}), written as 26 Crockford base32 ASCII bytes straight into a
 * caller's buffer.
 *
 * <p>Why not a ULID library's {@code toString()}: each id then costs a char array, a String and
 * its byte copy, and minting is a visible share of an edge load's CPU ({@link Mint} also draws
 * randomness once per millisecond, not per id). The Python path encodes in bulk for the same reason ({@code
 * ingest/convert.encode_ulids}); both are tested bit for bit against python-ulid.
 */
public final class Ulids {
  /** Crockford's base32 alphabet (no I, L, O, U), upper case as the ULID spec writes it */
  private static final byte[] ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ".getBytes(StandardCharsets.US_ASCII);
  /** characters of one ULID */
  public static final int LENGTH = 26;
  /** digit + 1 of each character of {@link #ALPHABET}, 0 for any other byte */
  private static final byte[] DIGIT = new byte[256];

  static {
    for (int d = 0; d < ALPHABET.length; d++) {
      DIGIT[ALPHABET[d]] = (byte) (d + 1);
    }
  }

  private Ulids() {}

  /**
   * The base32 digits (0-31) of the 128-bit ULID ``msb:lsb`` into ``out[0, 26)``: digit k holds
   * bits ``125 - 5k`` to ``129 - 5k`` (the two bits above 127 are zero, so the first is 0-7).
   */
  private static void digits(long msb, long lsb, byte[] out) {
    for (int k = 12, shift = 1; k >= 0; k--, shift += 5) { // bits 65-129: msb alone
      out[k] = (byte) ((msb >>> shift) & 31);
    }
    out[13] = (byte) (((lsb >>> 60) | (msb << 4)) & 31); // bits 60-64: both halves
    for (int k = 25, shift = 0; k >= 14; k--, shift += 5) { // bits 0-59: lsb alone
      out[k] = (byte) ((lsb >>> shift) & 31);
    }
  }

  /**
   * Whether ``b[off, off + len)`` is a ULID's text as minted: 26 digits of {@link #ALPHABET}, the
   * first at most 7 (128 bits). If so, its high and low words go to ``hi[j]``, ``lo[j]``. One text
   * per value: a lower-case or ambiguous letter (o, i, l) makes another id, so it is refused
   * here rather than read as a digit.
   */
  static boolean bits(byte[] b, int off, int len, long[] hi, long[] lo, int j) {
    if (len != LENGTH) {
      return false;
    }
    long h = 0;
    long l = 0;
    for (int k = 0; k < LENGTH; k++) {
      int d = DIGIT[b[off + k] & 0xFF] - 1;
      if (d < 0 || (k == 0 && d > 7)) {
        return false;
      }
      h = h << 5 | l >>> 59;
      l = l << 5 | d;
    }
    hi[j] = h;
    lo[j] = l;
    return true;
  }

  /** The text of one ULID (tests compare it with python-ulid's). */
  public static String text(long msb, long lsb) {
    return countUp(msb, lsb, 1)[0];
  }

  /**
   * Fresh ULIDs of one task, monotonic as the ULID spec defines it: the first id of a millisecond
   * takes a random 80-bit value (top bit clear, so 2^79 increments cannot overflow), each later id
   * of the same millisecond that value + 1.
   *
   * <p>Why: a random draw per id made the DRBG half of minting, and random ids are the slowest
   * text for Lance's FSST encoder; consecutive ids sharing all but their last characters encode
   * faster and smaller (docs/benchmarks.md). Uniqueness is no weaker: one task's ids
   * are strictly increasing, and two tasks minting in the same millisecond collide only if their
   * ranges of a few million out of 2^79 overlap.
   */
  static final class Mint {
    private final SecureRandom random = drbg();
    private final Counter counter = new Counter();
    private long time = Long.MIN_VALUE; // the millisecond the counter belongs to

    private static SecureRandom drbg() {
      try {
        return SecureRandom.getInstance("DRBG");
      } catch (java.security.NoSuchAlgorithmException e) { // every JDK since 9 has it; never weaker
        return new SecureRandom();
      }
    }

    /** The next id, minted at ``timeMillis``, into ``out[off, off + 26)``. */
    void next(long timeMillis, byte[] out, int off) {
      if (timeMillis != time) {
        time = timeMillis;
        counter.set((timeMillis << 16) | (random.nextInt() & 0x7FFF), random.nextLong());
      } else {
        counter.increment();
      }
      counter.copyTo(out, off);
    }
  }

  /**
   * A ULID's text that counts up: {@link #increment} adds 1 to the 128-bit value by adding 1 to
   * its last base32 digit and carrying, as on paper, so the next id costs a 26-byte copy and
   * (31 times in 32) one changed character instead of a full encoding of 26 characters (a
   * quarter of an edge load's minting time). The text is the value's, digit for
   * digit (see {@link Ulids#digits}), so the result equals encoding value + 1.
   */
  static final class Counter {
    private final byte[] digits = new byte[LENGTH]; // 0-31 per character
    private final byte[] text = new byte[LENGTH];

    /** Start at the 128-bit value ``msb:lsb``. */
    void set(long msb, long lsb) {
      Ulids.digits(msb, lsb, digits);
      for (int k = 0; k < LENGTH; k++) {
        text[k] = ALPHABET[digits[k]];
      }
    }

    /** Value + 1 (the caller keeps the value below 2^128). */
    void increment() {
      for (int k = LENGTH - 1; k >= 0; k--) {
        int d = digits[k] + 1;
        if (d < 32) {
          digits[k] = (byte) d;
          text[k] = ALPHABET[d];
          return;
        }
        digits[k] = 0; // 31 + 1: this digit wraps, the next one up carries
        text[k] = ALPHABET[0];
      }
    }

    void copyTo(byte[] out, int off) {
      System.arraycopy(text, 0, out, off, LENGTH);
    }
  }

  /** ``n`` ids counting up from ``msb:lsb`` through a {@link Counter} (tests compare them with python-ulid's). */
  public static String[] countUp(long msb, long lsb, int n) {
    Counter c = new Counter();
    c.set(msb, lsb);
    String[] out = new String[n];
    byte[] b = new byte[LENGTH];
    for (int i = 0; i < n; i++) {
      if (i > 0) {
        c.increment();
      }
      c.copyTo(b, 0);
      out[i] = new String(b, StandardCharsets.US_ASCII);
    }
    return out;
  }
}
