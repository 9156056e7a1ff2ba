package io.omnigraph.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The error codes the JVM raises are spec/error_codes.json's, spelled once ({@link ErrorCodes}). */
class ErrorCodesTest {
  private static final JsonNode SPEC = Spec.load("error_codes.json");
  private static final Pattern WORD = Pattern.compile("[A-Z][A-Z0-9_]*[A-Z0-9]");

  /** Every code the spec defines: the library's and the command line's. */
  private static Set<String> allCodes() {
    Set<String> out = new TreeSet<>();
    SPEC.get("errors").forEach(e -> out.add(e.get("code").asText()));
    SPEC.get("cli").forEach(e -> out.add(e.get("code").asText()));
    return out;
  }

  @Test
  void theConstantsAreTheCodesTheSpecSaysTheJvmRaises() throws IllegalAccessException {
    Set<String> want = new TreeSet<>();
    for (JsonNode e : SPEC.get("errors")) {
      for (JsonNode runtime : e.get("raised_by")) {
        if (runtime.asText().equals("jvm")) {
          want.add(e.get("code").asText());
        }
      }
    }
    Set<String> got = new TreeSet<>();
    for (Field f : ErrorCodes.class.getDeclaredFields()) {
      if (f.isSynthetic()) {
        continue;
      }
      int m = f.getModifiers();
      assertTrue(Modifier.isStatic(m) && Modifier.isFinal(m) && f.getType() == String.class, f.getName());
      f.setAccessible(true);
      assertEquals(f.getName(), f.get(null), "a constant is named as its code");
      got.add((String) f.get(null));
    }
    assertEquals(want, got);
  }

  @Test
  void noOtherSourceFileSpellsACode() {
    Set<String> codes = allCodes();
    TreeMap<String, List<String>> spelled = new TreeMap<>();
    for (Path p : mainSources()) {
      List<String> found = new ArrayList<>();
      for (String literal : literals(read(p))) {
        Matcher m = WORD.matcher(literal);
        while (m.find()) {
          if (codes.contains(m.group())) {
            found.add(m.group());
          }
        }
      }
      spelled.put(p.getFileName().toString(), found);
    }
    Set<String> constants = new TreeSet<>(spelled.remove("ErrorCodes.java"));
    assertTrue(codes.size() > 30, "the spec's codes were read");
    assertTrue(constants.containsAll(List.of(ErrorCodes.NULL_VIOLATION, ErrorCodes.TYPE_MISMATCH)), "the scan finds literals");
    spelled.values().removeIf(List::isEmpty);
    assertEquals(new TreeMap<>(), spelled, "use ErrorCodes instead of a code's literal");
  }

  @Test
  void theLiteralScanSkipsCommentsAndCharacters() {
    String src = "// \"NOT_A\" \n/* \"NOR_B\" */ char c = '\"'; String s = \"x \\\"Y_Z\\\" \" + \"W\"; /** \"C\" */";
    assertEquals(List.of("x \\\"Y_Z\\\" ", "W"), literals(src));
  }

  private static List<Path> mainSources() {
    Path dir = Paths.get(System.getProperty("basedir", "."), "src", "main", "java");
    if (!Files.isDirectory(dir)) {
      dir = Paths.get("jvm-shim", "src", "main", "java");
    }
    try (Stream<Path> files = Files.walk(dir)) {
      List<Path> out = new ArrayList<>();
      files.filter(f -> f.toString().endsWith(".java")).sorted().forEach(out::add);
      assertTrue(out.size() > 10, "the shim's sources under " + dir.toAbsolutePath());
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String read(Path p) {
    try {
      return new String(Files.readAllBytes(p), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The string literals of Java source {@code s} (as written, escapes kept), outside comments and char literals. */
  static List<String> literals(String s) {
    List<String> out = new ArrayList<>();
    int i = 0;
    int n = s.length();
    while (i < n) {
      char c = s.charAt(i);
      if (s.startsWith("//", i)) {
        int end = s.indexOf('\n', i);
        i = end < 0 ? n : end + 1;
      } else if (s.startsWith("/*", i)) {
        int end = s.indexOf("*/", i + 2);
        i = end < 0 ? n : end + 2;
      } else if (s.startsWith("\"\"\"", i)) { // a text block
        int end = s.indexOf("\"\"\"", i + 3);
        out.add(s.substring(i + 3, end < 0 ? n : end));
        i = end < 0 ? n : end + 3;
      } else if (c == '"' || c == '\'') {
        int j = i + 1;
        while (j < n && s.charAt(j) != c) {
          j += s.charAt(j) == '\\' ? 2 : 1;
        }
        if (c == '"') {
          out.add(s.substring(i + 1, Math.min(j, n)));
        }
        i = j + 1;
      } else {
        i++;
      }
    }
    return out;
  }
}
