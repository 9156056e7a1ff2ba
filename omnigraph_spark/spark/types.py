"""Catalog/Arrow -> Spark type mapping, and the per-batch Arrow conversion applied on read.

Why a conversion at all: the Python DataSource API only accepts ``RecordBatch``es whose Arrow
schema *equals* ``to_arrow_schema(spark_schema)``, while Omnigraph stores several types Spark has
no direct Arrow twin for (unsigned integers, ``Date64`` DateTimes, fixed-size vectors). Every
conversion below is exact: values are widened, never rounded; a value that cannot be represented
raises instead of silently changing.

Type mapping (read path):

=====================  ===========================  ==========================  =====================================
Omnigraph ``.pg``      Stored Arrow type            Spark type                  Conversion on read
=====================  ===========================  ==========================  =====================================
``id``/``src``/``dst``  Utf8 not null               ``StringType`` not null     none
``String``             Utf8                         ``StringType``              none
``enum(...)``          Utf8                         ``StringType``              none (values are checked on write)
``Bool``               Boolean                      ``BooleanType``             none
``I32``                Int32                        ``IntegerType``             none
``I64``                Int64                        ``LongType``                none
``U32``                UInt32                       ``LongType``                widened to Int64 (exact)
``U64``                UInt64                       ``DecimalType(20, 0)``      to Decimal128(20, 0) (exact)
``F32``                Float32                      ``FloatType``               none
``F64``                Float64                      ``DoubleType``              none
``Date``               Date32 (days)                ``DateType``                none
``DateTime``           Date64 (ms since epoch)      ``TimestampType``           ms -> us, UTC (exact)
``[T]``                List<T>                      ``ArrayType(T', true)``     element converted as T
``Vector(n)``          FixedSizeList<Float32>[n]    ``ArrayType(FloatType)``    to a variable-size list (exact)
``Blob``               LargeBinary (plain tables)   ``BinaryType``              LargeBinary -> Binary
=====================  ===========================  ==========================  =====================================

Nullability follows the schema's ``?``; list elements and vector items are always nullable.
Blob columns stored as the Lance ``lance.blob.v2`` extension (engine-written Blob tables) are not
readable yet and raise :class:`~omnigraph_spark.errors.UnsupportedValueError` at planning time.

Pure functions, no state: safe on the driver and on executors.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..errors import CorruptGraphError, UnknownColumnError, UnsupportedValueError
from ..schema.catalog import PropType, TypeDef

_SCALARS = {
    "String": StringType(),
    "Bool": BooleanType(),
    "I32": IntegerType(),
    "I64": LongType(),
    "U32": LongType(),
    "U64": DecimalType(20, 0),
    "F32": FloatType(),
    "F64": DoubleType(),
    "Date": DateType(),
    "DateTime": TimestampType(),
    "Blob": BinaryType(),
}


def spark_type(pt: PropType) -> DataType:
    """The Spark type of a property type (see the module table)."""
    if pt.scalar == "Vector":
        base: DataType = ArrayType(FloatType(), containsNull=True)
    else:
        base = _SCALARS[pt.scalar]
    if pt.list:
        return ArrayType(base, containsNull=True)
    return base


def spark_schema(typedef: TypeDef, columns: Sequence[str] | None = None) -> StructType:
    """The Spark schema of a node or edge table: system columns then properties in IR order,
    or exactly ``columns`` (in the order given) when a selection is made.

    Raises:
        UnknownColumnError: a selected column is not a system column or property of the type.
    """
    fields = {c: StructField(c, StringType(), False) for c in typedef.system_columns}
    for p in typedef.properties:
        fields[p.name] = StructField(p.name, spark_type(p.type), p.type.nullable)
    if columns is None:
        return StructType(list(fields.values()))
    missing = [c for c in columns if c not in fields]
    if missing:
        raise UnknownColumnError(
            f"column(s) {missing} are not columns of {typedef.kind} type '{typedef.name}' (columns: {list(fields)})",
            type=typedef.name,
            columns=missing,
        )
    return StructType([fields[c] for c in columns])


def arrow_target_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema the Python DataSource API expects for ``schema``.

    pyspark 4.1+ takes ``timezone=``; 4.0 takes ``timestamp_utc=`` (both mean UTC here)."""
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema, timestamp_utc=True)  # type: ignore[call-arg]  # pyspark 4.0's name


def _is_blob_extension(t: pa.DataType) -> bool:
    return isinstance(t, pa.ExtensionType) or pa.types.is_struct(t)


def check_readable(typedef: TypeDef, stored: pa.Schema, columns: Sequence[str]) -> None:
    """Planning-time check that every selected stored column can be converted.

    Raises:
        UnsupportedValueError: a Blob column is stored as a Lance blob extension/struct.
    """
    for c in columns:
        if c in stored.names and _is_blob_extension(stored.field(c).type):
            raise UnsupportedValueError(
                f"column '{c}' of '{typedef.name}' is a Lance blob column ({stored.field(c).type}); reading "
                "engine-written Blob columns is not supported yet. Leave it out with the 'columns' option.",
                type=typedef.name,
                column=c,
            )


def convert_array(arr: pa.Array, target: pa.DataType, column: str) -> pa.Array:
    """Convert one stored column to the Arrow type Spark expects. Exact (``safe`` cast):
    an out-of-range value raises rather than wraps.

    Raises:
        CorruptGraphError: the stored values do not convert (wrong stored type or overflow).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type.equals(target):
        return arr
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CorruptGraphError(
            f"column '{column}' stored as {arr.type} cannot be read as {target}: {e}", column=column
        ) from e


def convert_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Convert a Lance batch to ``target`` (column by column, by name). Columns absent from the
    batch (a table version older than a schema change) read as nulls when nullable.

    Runs on executors, once per batch: memory is bounded by the batch.
    """
    arrays: list[pa.Array] = []
    names = batch.schema.names
    for f in target:
        if f.name in names:
            arrays.append(convert_array(batch.column(names.index(f.name)), f.type, f.name))
        elif f.nullable:
            arrays.append(pa.nulls(batch.num_rows, f.type))
        else:
            raise CorruptGraphError(f"non-null column '{f.name}' is missing from the stored table", column=f.name)
    return pa.RecordBatch.from_arrays(arrays, schema=target)
