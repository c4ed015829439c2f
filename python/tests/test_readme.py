"""The README's "From Python / PyTorch" examples run as written, and its install
commands give an importable package."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def section():
    text = (ROOT / "README.md").read_text()
    start = text.index("## From Python / PyTorch")
    return text[start:text.index("\n## ", start + 1)]


def test_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", section(), re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    (tmp_path / "golden").symlink_to(ROOT / "golden")
    (tmp_path / "data").symlink_to(ROOT / "data")
    namespace = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    assert (tmp_path / "acts.safetensors").exists() and (tmp_path / "x.safetensors").exists()


def test_install_commands(tmp_path):
    """The section's sh block as written, in a directory where `build` is this build tree and with
    $HOME in tmp_path: the install into "$HOME/.local/fp4emu", PYTHONPATH, and the import."""
    build = os.environ.get("FP4EMU_BUILD_DIR")
    if not build:
        pytest.skip("FP4EMU_BUILD_DIR is not set (ctest sets it)")
    lines = re.search(r"```sh\n(.*?)```", section(), re.S).group(1).strip().splitlines()
    # The first line configures and builds: what made FP4EMU_BUILD_DIR.
    assert lines[0].startswith("cmake -S . -B build -DFP4EMU_BUILD_PYTHON=ON && cmake --build build"), lines[0]
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert any(line.startswith(f'export PYTHONPATH="$HOME/.local/fp4emu/{site}"') for line in lines), \
        "the README names this Python's site-packages"
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "build").symlink_to(build)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HOME"] = str(tmp_path)
    script = "set -e\n" + "\n".join(lines[1:]) + '\n/usr/bin/python3 -c "import fp4emu; print(fp4emu.__file__)"\n'
    r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path / "cwd")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.strip().splitlines()
    assert "'mxfp4.ocp'" in out[-2], out   # the README's own print
    assert out[-1].startswith(str(tmp_path / ".local" / "fp4emu" / site)), out   # imported from the install
