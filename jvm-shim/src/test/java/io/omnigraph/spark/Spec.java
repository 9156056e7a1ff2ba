package io.omnigraph.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;

/**
 * The repository's shared golden files ({@code spec/}, beside {@code jvm-shim/}): the rules both
 * runtimes implement, which tests/test_spec.py checks against the Python side field by field.
 */
final class Spec {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Spec() {}

  /** {@code spec/<name>}: surefire names the folder (omnigraph.spec.dir); else found from the working directory. */
  static JsonNode load(String name) {
    String dir = System.getProperty("omnigraph.spec.dir");
    Path p = dir != null ? Paths.get(dir, name) : Paths.get("..", "spec", name);
    if (!Files.isRegularFile(p)) {
      p = Paths.get("spec", name);
    }
    try {
      return JSON.readTree(p.toFile());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the golden file " + p.toAbsolutePath(), e);
    }
  }

  /** An unsigned 64-bit value written as hex. */
  static long hex64(JsonNode v) {
    return Long.parseUnsignedLong(v.asText(), 16);
  }

  /** The text values of a JSON array (null for JSON null). */
  static List<String> strings(JsonNode values) {
    List<String> out = new ArrayList<>();
    values.forEach(v -> out.add(v.isNull() ? null : v.asText()));
    return out;
  }

  static VarCharVector varchar(String name, List<String> values, BufferAllocator allocator) {
    VarCharVector v = new VarCharVector(name, allocator);
    v.allocateNew(values.size());
    for (int i = 0; i < values.size(); i++) {
      if (values.get(i) == null) {
        v.setNull(i);
      } else {
        v.setSafe(i, values.get(i).getBytes(java.nio.charset.StandardCharsets.UTF_8));
      }
    }
    v.setValueCount(values.size());
    return v;
  }

  /** A vector of a golden case's values: strings as VarChar, integers as BigInt. */
  static FieldVector vector(String name, JsonNode values, BufferAllocator allocator) {
    boolean ints = false;
    for (JsonNode v : values) {
      ints |= v.isIntegralNumber();
    }
    if (!ints) {
      return varchar(name, strings(values), allocator);
    }
    BigIntVector v = new BigIntVector(name, allocator);
    v.allocateNew(values.size());
    for (int i = 0; i < values.size(); i++) {
      if (values.get(i).isNull()) {
        v.setNull(i);
      } else {
        v.set(i, values.get(i).asLong());
      }
    }
    v.setValueCount(values.size());
    return v;
  }
}
