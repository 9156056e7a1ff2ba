"""``python -m omnigraph_spark.cli``: the same as the ``omnigraph-spark`` console script."""

import sys

from .main import main

sys.exit(main())
