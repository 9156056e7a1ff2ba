"""The ``omnigraph-spark`` command line (argparse), on top of :mod:`omnigraph_spark.graph` and,
for ``load`` only, :mod:`omnigraph_spark.spark`.

Modules: :mod:`.main` (parser, dispatch, exit codes), :mod:`.output` (human text or ``--json``),
:mod:`.store_cmds` (init, status, log, branch, recover), :mod:`.maintenance_cmds` (optimize,
cleanup), :mod:`.load_cmd` (load through local Spark, with a progress bar). Every command but
``load`` runs without starting Spark. Exit codes are documented in ``docs/cli.md``.

In-process use (tests, notebooks)::

    from omnigraph_spark.cli.main import main
    rc = main(["status", "/data/graph", "--json"])
"""
