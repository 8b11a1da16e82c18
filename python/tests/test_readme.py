"""The README's Python example runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import DEMO, ROOT


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    readme = (ROOT / "README.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", readme, re.S)
    (tmp_path / "src").mkdir()
    os.symlink(DEMO, tmp_path / "src" / "demo")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "We fly to Sapporo on Monday." in printed
    assert "'edus': [" in printed and "'doc': " in printed
    assert (tmp_path / "notes.db").is_dir()
