"""A model built on the meta device given real, uninitialised storage on its device."""

from __future__ import annotations

import torch
from torch import nn


def _empty_like(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    return torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=device)


def allocate_on(model: nn.Module, device: torch.device) -> None:
    """Replaces every meta parameter and buffer of ``model`` with empty storage on ``device``.

    NOTE: ``nn.Module.to_empty`` does the same through ``torch.empty_like``, whose meta-tensor
    path imports sympy (via torch.fx's symbolic shapes): ~0.5-1 s at every start, for a
    library nothing else in the engine uses. ``torch.empty_strided`` takes the sizes and
    strides as plain arguments and allocates directly. A parameter shared by two modules
    (tied weights) stays shared.
    """
    params: dict[int, nn.Parameter] = {}
    buffers: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, param in list(module.named_parameters(recurse=False, remove_duplicate=False)):
            if id(param) not in params:
                params[id(param)] = nn.Parameter(_empty_like(param, device), requires_grad=param.requires_grad)
            setattr(module, name, params[id(param)])
        for name, buffer in list(module.named_buffers(recurse=False, remove_duplicate=False)):
            if id(buffer) not in buffers:
                buffers[id(buffer)] = _empty_like(buffer, device)
            setattr(module, name, buffers[id(buffer)])
