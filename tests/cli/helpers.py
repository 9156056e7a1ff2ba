"""Run the CLI in-process and capture what it prints."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from omnigraph_spark.cli.main import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


def cli(*argv: Any) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return Result(code, out.getvalue(), err.getvalue())


def error_codes(stderr: str) -> list[str]:
    """CODE of every ``error[CODE]: message`` line."""
    return [line[len("error[") : line.index("]")] for line in stderr.splitlines() if line.startswith("error[")]
