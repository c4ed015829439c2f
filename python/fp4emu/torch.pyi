import os
from typing import Any, Optional, Union

import torch
from torch import nn

def fake_quant(t: torch.Tensor, recipe: str, axis: int = -1, rounding: Optional[str] = None,
               tail: Optional[str] = None, global_amax: Optional[float] = None, threads: int = 0,
               impl: str = "auto", dtype: Optional[torch.dtype] = None, *, seed: Optional[int] = None,
               offset: Optional[int] = None, rng: Optional[str] = None, rbits: Any = None,
               rbits_map: Optional[str] = None) -> torch.Tensor: ...

class FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, recipe: str, axis: int = -1,
                options: Optional[dict[str, Any]] = None) -> torch.Tensor: ...
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]: ...

class QuantizedLinear(nn.Module):
    linear: nn.Linear
    recipe: str
    residual: Optional[str]
    weights: bool
    inputs: bool
    transform: Optional[str]
    calib: Optional[torch.Tensor]
    def __init__(self, linear: nn.Linear, recipe: str, residual: Optional[str] = None, weights: bool = False,
                 options: Optional[dict[str, Any]] = None, inputs: bool = True, transform: Optional[str] = None,
                 calib: Optional[torch.Tensor] = None) -> None: ...
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...

def quantize_linear_inputs(model: nn.Module, recipe: str, modules: str = "*.mlp.*", residual: Optional[str] = None,
                           weights: bool = False, inputs: bool = True, transform: Optional[str] = None,
                           calib: Optional[dict[str, torch.Tensor]] = None, **options: Any) -> list[str]: ...
def capture_inputs(model: nn.Module, inputs: Any, modules: str = "*") -> dict[str, torch.Tensor]: ...
def dump_activations(model: nn.Module, inputs: Any, path: Union[str, os.PathLike], modules: str = "*",
                     dtype: Optional[str] = None, prefix: str = "") -> list[str]: ...
def rht(t: torch.Tensor, b: int = 16, axis: int = -1, seed: int = 0, signs: str = "seeded",
        inverse: bool = False) -> torch.Tensor: ...

class Fp4Linear(nn.Module):
    linear: nn.Linear
    recipe: Optional[str]
    rht: Optional[int]
    rht_signs: str
    rht_seed: int
    sr: bool
    seed: int
    index: int
    steps: int
    def __init__(self, linear: nn.Linear, recipe: Optional[str], rht: Optional[int] = None, rht_signs: str = "te",
                 rht_seed: int = 0, sr: bool = False, seed: int = 0, index: int = 0,
                 options: Optional[dict[str, Any]] = None) -> None: ...
    def sr_seed(self, role: int) -> int: ...
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...

def fp4_training(model: nn.Module, recipe: Optional[str], modules: str = "*", rht: Optional[int] = None,
                 rht_signs: str = "te", rht_seed: int = 0, sr: bool = False, seed: int = 0,
                 **options: Any) -> list[str]: ...
