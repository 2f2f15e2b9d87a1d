"""scripts/sum_pytest_runs.py: the suite's one closing line from its two pytest runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sum_pytest_runs.py"


def _run(*logs: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, logs)], capture_output=True, text=True, timeout=60)


def test_the_counts_of_both_runs_are_added_and_errors_count_as_failures(tmp_path: Path) -> None:
    rest = tmp_path / "rest.txt"
    rest.write_text("....\nSKIPPED [1] a.py:3: no lerobot\n"
                    "1230 passed, 1 skipped, 14 deselected, 4 warnings in 301.20s (0:05:01)\n")
    system = tmp_path / "system.txt"
    system.write_text("F.\n========= 2 failed, 17 passed, 1 error, 1245 deselected in 280.02s (0:04:40) =========\n")
    done = _run(rest, system)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "suite: 1247 passed, 3 failed, 1 skipped"


def test_a_run_without_a_closing_line_is_a_failure_naming_its_log(tmp_path: Path) -> None:
    crashed = tmp_path / "crashed.txt"
    crashed.write_text("....\nINTERNALERROR> boom\n")
    done = _run(crashed)
    assert done.returncode == 1
    assert str(crashed) in done.stderr and done.stdout == ""
