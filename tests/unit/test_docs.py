"""The docs build, and what they point to exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gt4py_halo as gh

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_reference_builds(tmp_path):
    """``make docs``: pdoc renders every public name of ``gt4py_halo`` with its docstring."""
    subprocess.run(
        [sys.executable, "-m", "pdoc", "-d", "restructuredtext", "-o", tmp_path, "gt4py_halo"],
        check=True,
        capture_output=True,
    )
    page = (tmp_path / "gt4py_halo.html").read_text()
    for name in gh.__all__:
        assert f'id="{name}"' in page, f"{name} missing from the API reference"


def test_the_user_docs_name_files_that_exist():
    """Every repository path the README and docs/ mention in backticks exists."""
    roots = "docs|examples|benchmarks|tools|src|tests|compiled|transports|decomposition|runtime"
    mentioned = re.compile(rf"`((?:{roots})/[\w./-]+?)`")
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for path in mentioned.findall(doc.read_text()):
            found = (ROOT / path).exists() or (ROOT / "src/gt4py_halo" / path).exists()
            assert found, f"{doc.name} mentions {path}, which does not exist"
