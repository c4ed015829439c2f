import os
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Union

PathLike = Union[str, os.PathLike]

def generate(out: PathLike, formats: Optional[Iterable[str]] = None, recipes: Optional[Iterable[str]] = None,
             families: Optional[Iterable[str]] = None, cases: Optional[Iterable[str]] = None, level: int = 1,
             seed: int = 1, threads: int = 0) -> dict[str, int]: ...

@dataclass
class CaseResult:
    id: str
    family: str
    recipe: str
    status: str
    outputs: int
    compared: int
    mismatches: int
    classification: str = ...
    notes: list[str] = ...

@dataclass
class VerifyReport:
    exit_code: int
    cases: list[CaseResult]
    mismatches: list[dict[str, Any]]
    total_mismatches: int
    errors: list[str]
    text: str
    json: dict[str, Any]
    @property
    def passed(self) -> bool: ...
    def count(self, status: str) -> int: ...

def verify(suite: PathLike, candidate: PathLike, max_report: int = 20, strict: bool = False,
           skip_missing: bool = False, families: Optional[Iterable[str]] = None,
           cases: Optional[Iterable[str]] = None, recipes: Optional[Iterable[str]] = None) -> VerifyReport: ...
