"""Shared fixtures: the repository root and the fp4emu command line to compare with."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def cli():
    """Runs the fp4emu command (FP4EMU_CLI, set by ctest); returns stdout, raises with stderr."""
    exe = os.environ.get("FP4EMU_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("FP4EMU_CLI does not name the fp4emu binary (ctest sets it)")

    def run(*args, check=True):
        r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"fp4emu {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
        return r
    return run
