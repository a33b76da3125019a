"""The layers (docs/design.md) hold: import-linter's contracts (.importlinter) are kept, and no
module imports itself through a chain of others (an import circle)."""
import os
import subprocess
import sys

import pytest

import launching

grimp = pytest.importorskip("grimp")


def test_import_contracts_are_kept():
  lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
  out = subprocess.run([lint, "--no-cache"], cwd=launching.ROOT, capture_output=True, text=True,
                       timeout=300)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
  assert "0 broken" in out.stdout


def test_no_import_circle():
  graph = grimp.build_graph("vcbench", "launch", "configs")
  circles = sorted({tuple(sorted((a, b))) for a in graph.modules
                    for b in graph.find_modules_directly_imported_by(a)
                    if graph.chain_exists(importer=b, imported=a)})
  assert not circles, circles
