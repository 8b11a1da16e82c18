"""The package type-checks (mypy --strict) for its users: annotations,
the native module's stub (_edudb.pyi) and py.typed ship in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--show-error-codes", *args],
        capture_output=True,
        text=True,
        cwd=HERE,
    )


def test_the_installed_package_passes_mypy_strict() -> None:
    checked = mypy("-p", "edudb")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_user_code_checks_and_its_mistakes_are_caught() -> None:
    checked = mypy("typed_usage.py")
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    lines = (HERE / "typed_usage.py").read_text().splitlines()
    mistaken = {number for number, line in enumerate(lines, 1) if "# MISTAKE" in line}
    flagged = {int(re.match(r"typed_usage\.py:(\d+):", e).group(1)) for e in errors}
    assert flagged == mistaken, checked.stdout
