"""Execute a notebook headless with nbclient on a kernel that runs THIS interpreter.

Usage: python run_notebook.py NOTEBOOK OUT_NOTEBOOK [TIMEOUT_PER_CELL_S]

A kernel spec named ``omnigraph-spark-venv`` pointing at ``sys.executable`` is registered in a
temporary JUPYTER_PATH directory (nothing is installed into the user's Jupyter config), so the
notebook imports the venv's pyspark and omnigraph_spark. Exit 0 when every cell ran, 1 with the
failing cell's error otherwise. Run as a subprocess by tests/examples/test_examples.py.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

KERNEL = "omnigraph-spark-venv"


def register_kernel(base: str) -> None:
    d = os.path.join(base, "kernels", KERNEL)
    os.makedirs(d, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (omnigraph-spark venv)",
        "language": "python",
        "env": {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
    }
    with open(os.path.join(d, "kernel.json"), "w") as f:
        json.dump(spec, f)
    os.environ["JUPYTER_PATH"] = base + (
        os.pathsep + os.environ["JUPYTER_PATH"] if os.environ.get("JUPYTER_PATH") else ""
    )


def main(argv) -> int:
    src, dst = argv[1], argv[2]
    timeout = int(argv[3]) if len(argv) > 3 else 600
    base = tempfile.mkdtemp(prefix="jupyter-")
    register_kernel(base)
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(src, as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=timeout, resources={"metadata": {"path": os.getcwd()}})
    try:
        client.execute()
        rc = 0
    except CellExecutionError as e:
        print(f"notebook cell failed:\n{e}", file=sys.stderr)
        rc = 1
    nbformat.write(nb, dst)
    n = sum(1 for c in nb.cells if c.cell_type == "code")
    print(f"executed {n} code cells of {src} -> {dst} (rc={rc})")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
