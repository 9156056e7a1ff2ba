package io.omnigraph.spark;

/**
 * The connector's error codes the JVM raises itself (a row a staging task refuses, {@link
 * RowRules.RowRuleException}; a catalog table's refused option or statement); the driver turns each back into the Python error class of that
 * code ({@code omnigraph_spark/spark/bad_rows.py}). The codes, their classes and which runtime
 * raises each are defined once, in {@code spec/error_codes.json}: ErrorCodesTest checks these
 * constants against it field by field, and that no other source file of the shim spells a code.
 */
final class ErrorCodes {
  /** A null in a non-nullable column ({@code NullViolationError}). */
  static final String NULL_VIOLATION = "NULL_VIOLATION";
  /** A value outside an enum's values ({@code ConstraintViolationError}). */
  static final String CONSTRAINT_VIOLATION = "CONSTRAINT_VIOLATION";
  /** A value the column's type cannot hold exactly: a DateTime finer than a millisecond ({@code TypeMismatchError}). */
  static final String TYPE_MISMATCH = "TYPE_MISMATCH";

  /** A read option a catalog table cannot take ({@code OptionError}, {@link CatalogTable}). */
  static final String OPTION_INVALID = "OPTION_INVALID";
  /** A SQL statement the catalog does not run ({@code SqlUnsupportedError}, {@link OmnigraphCatalog}). */
  static final String SQL_UNSUPPORTED = "SQL_UNSUPPORTED";

  private ErrorCodes() {}
}
