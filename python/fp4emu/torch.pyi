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
    def __init__(self, linear: nn.Linear, recipe: str, residual: Optional[str] = None, weights: bool = False,
                 options: Optional[dict[str, Any]] = None) -> None: ...
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...

def quantize_linear_inputs(model: nn.Module, recipe: str, modules: str = "*.mlp.*", residual: Optional[str] = None,
                           weights: bool = False, **options: Any) -> list[str]: ...
def dump_activations(model: nn.Module, inputs: Any, path: Union[str, os.PathLike], modules: str = "*",
                     dtype: Optional[str] = None, prefix: str = "") -> list[str]: ...
