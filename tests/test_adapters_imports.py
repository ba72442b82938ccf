"""Importing situated (and its adapters package) imports no framework."""

from __future__ import annotations

import subprocess
import sys


def test_no_framework_is_imported_by_situated() -> None:
    code = (
        "import sys, situated, situated.aio, situated.adapters\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'langchain_core', 'langgraph', 'agents', 'openai'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
