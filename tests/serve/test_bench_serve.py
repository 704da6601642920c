"""benchmarks/bench_serve.py in its quick mode: a dozen students submit to the real server; all graded, no error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_bench_grades_every_submission_without_a_request_error(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_serve.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.is_file(), done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["errors"] == [], done.stdout + done.stderr
    assert figures["students"] == figures["submissions"] == 12
    assert figures["not_graded"] == 0 and figures["wrong"] == []
    assert len(figures["latencies"]) == 12 and all(0 < t < 120 for t in figures["latencies"])
    assert "students 12, submissions 12, graded with feedback seen 12" in done.stdout
    assert "command: python benchmarks/bench_serve.py --quick --json" in done.stdout
    # the p95 target is the full benchmark's (a loaded machine may miss it here): exit 0 means it was met
    assert done.returncode == (0 if figures["p95"] <= 5 else 1)
