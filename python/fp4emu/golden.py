"""Golden-vector suites: ``fp4emu golden generate`` and ``fp4emu golden verify`` in process.

A suite (golden/README.md) holds inputs and the exact outputs of each
recipe; a kernel's outputs, written in the same layout under a candidate
folder, are verified against it.

Example::

    import fp4emu
    fp4emu.golden.generate("suite", recipes=["mxfp4.ocp"])
    report = fp4emu.golden.verify("suite", "my_kernel_out")
    print(report.text); assert report.passed
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from . import _core

PathLike = Union[str, os.PathLike]


def _list(v: Optional[Union[str, Iterable[str]]]) -> list[str]:
    if v is None:
        return []
    return v.split(",") if isinstance(v, str) else list(v)


def generate(out: PathLike, formats: Optional[Iterable[str]] = None, recipes: Optional[Iterable[str]] = None,
             families: Optional[Iterable[str]] = None, cases: Optional[Iterable[str]] = None, level: int = 1,
             seed: int = 1, threads: int = 0) -> dict:
    """Write a suite to ``out`` (replaced atomically): ``{"cases", "files", "bytes"}``.

    ``recipes``: ids, or ``["all"]`` for every packed recipe (default: the
    checked-in set, each format's default and hardware recipes). ``families``
    and ``cases``: globs. ``level``: 1 edges + small random, 2 + larger
    random, 3 + exhaustive bf16 sets. The bytes depend only on the options.

    Example::

        >>> fp4emu.golden.generate("suite", recipes=["nvfp4.te"], families=["special"])["cases"]
        1
    """
    return _core.golden_generate(os.fspath(out), _list(formats), _list(recipes), _list(families), _list(cases),
                                 level, seed, threads)


@dataclass
class CaseResult:
    """One case's outcome: status pass | fail | partial | not_run | error | stale."""
    id: str
    family: str
    recipe: str
    status: str
    outputs: int
    compared: int
    mismatches: int
    classification: str = ""
    notes: list = field(default_factory=list)


@dataclass
class VerifyReport:
    """The verifier's report (``fp4emu golden verify --json`` as objects).

    ``passed``: every selected case passes; ``exit_code`` as the command's
    (0 pass, 1 mismatch, 2 bad or missing candidate files, stale suite);
    ``cases``: one :class:`CaseResult` each; ``mismatches``: the first
    differing values (dicts: case, file, kind, block, element, expected,
    actual, cause, ...); ``text``: the command's report.
    """
    exit_code: int
    cases: list
    mismatches: list
    total_mismatches: int
    errors: list
    text: str
    json: dict

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cases)


def verify(suite: PathLike, candidate: PathLike, max_report: int = 20, strict: bool = False,
           skip_missing: bool = False, families: Optional[Iterable[str]] = None,
           cases: Optional[Iterable[str]] = None, recipes: Optional[Iterable[str]] = None) -> VerifyReport:
    """Compare a kernel's outputs under ``candidate`` with ``suite``; a :class:`VerifyReport`.

    A damaged suite or a bad filter raises ``ValueError``; mismatches and
    missing candidate files are in the report.

    Example::

        >>> r = fp4emu.golden.verify("golden/suite", "out", recipes=["mxfp4.ocp"], skip_missing=True)
        >>> r.passed, r.count("pass")
        (True, 20)
    """
    r = _core.golden_verify(os.fspath(suite), os.fspath(candidate), max_report, strict, skip_missing,
                            _list(families), _list(cases), _list(recipes))
    j = json.loads(r["json"])
    fields = CaseResult.__dataclass_fields__
    return VerifyReport(exit_code=r["exit_code"], cases=[CaseResult(**{k: v for k, v in c.items() if k in fields})
                                                         for c in j["cases"]],
                        mismatches=j["mismatches"], total_mismatches=j["total_mismatches"], errors=j["errors"],
                        text=r["text"], json=j)
