"""The Python DataSource API's own floor, measured with the same DataFrames as the connector.

``omnigraph_bench_floor`` is a Python data source that does the least any Python source can:

* write: receive every Arrow batch Spark sends to the Python worker, count the rows, commit
  nothing. Its time is the JVM -> Python hop plus Spark's job and worker overheads.
* read: one task per Lance fragment, stream the fragment's batches with pylance and convert
  them to Spark's Arrow types (the same conversion the connector does): no graph, no snapshot,
  no pinning. Its time is the Python -> JVM hop plus the cheapest possible Lance scan.

A ratio ``omnigraph / floor`` near 1 means the connector's own work is not what limits it; the
gap to Parquet is then the API's (Spark ships every row through a Python worker).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

NAME = "omnigraph_bench_floor"


@dataclass
class Counted(WriterCommitMessage):
    rows: int


class FloorWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return Counted(sum(b.num_rows for b in iterator))

    def commit(self, messages: list[Counted]) -> None:  # nothing to publish
        pass


class FloorReader(DataSourceReader):
    def __init__(self, uri: str, schema: StructType) -> None:
        import lance

        self.uri = uri
        self.schema = schema
        self.fragments = [f.fragment_id for f in lance.dataset(uri).get_fragments()]

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(fid) for fid in self.fragments]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import lance

        from omnigraph_spark.spark.types import arrow_target_schema, convert_batch

        target = arrow_target_schema(self.schema)
        ds = lance.dataset(self.uri)
        for b in ds.get_fragment(partition.value).to_batches(columns=target.names, batch_size=8192):
            yield convert_batch(b, target)


class FloorSource(DataSource):
    """``spark.read.format(NAME).schema(s).load(lance_uri)``; ``df.write.format(NAME).save()``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        raise ValueError(f"{NAME} needs a user schema: .schema(spark_schema)")

    def reader(self, schema: StructType) -> FloorReader:
        return FloorReader(self.options["path"], schema)

    def writer(self, schema: StructType, overwrite: bool) -> FloorWriter:
        return FloorWriter()
