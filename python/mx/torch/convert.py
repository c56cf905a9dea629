"""mx.torch.convert: swap a model's eligible `torch.nn.Linear` layers for `mx.torch.Linear`, in place.

    report = mx.torch.convert(model, mx.torch.recipes.Delayed(history_len=32),
                              filter_fn=lambda module, name: "lm_head" not in name)
    print(report)   # what was swapped, and why the others were not

A layer is swapped when `filter_fn(module, name)` (if given) says so and its shapes pass the
recipe's rule: in_features and out_features multiples of `recipe.required_multiple` (each is the K
of one GEMM, which takes whole scale blocks along K; the token count is checked per call). The new
layer keeps the old one's parameters (the same Parameter objects, so an optimizer made before still
updates them), and subclasses of nn.Linear are left alone (their forward may do more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import recipes
from .linear import Linear


@dataclass
class ConversionReport:
    """What `convert` did: the swapped layers (name, in_features, out_features) and the skipped ones
    (name, reason)."""
    recipe: recipes.Recipe
    swapped: list[tuple[str, int, int]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"mx.torch.convert({self.recipe.key}): {len(self.swapped)} swapped, "
                 f"{len(self.skipped)} skipped"]
        lines += [f"  swapped {name} [{k} -> {n}]" for name, k, n in self.swapped]
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def _reason_to_skip(module: torch.nn.Module, name: str, recipe: recipes.Recipe, filter_fn) -> str | None:
    if type(module) is not torch.nn.Linear:
        return f"{type(module).__name__} is not a plain torch.nn.Linear"
    if filter_fn is not None and not filter_fn(module, name):
        return "filter_fn"
    multiple = recipe.required_multiple
    bad = [f"{what}={v}" for what, v in (("in_features", module.in_features),
                                          ("out_features", module.out_features)) if v % multiple]
    if bad:
        return f"{', '.join(bad)} not a multiple of {multiple} ({recipe.name})"
    return None


def swap(module: torch.nn.Linear, recipe: recipes.Recipe, **options) -> Linear:
    """An mx.torch.Linear holding `module`'s parameters (its own state on their device)."""
    new = Linear(module.in_features, module.out_features, module.bias is not None, device="meta",
                 dtype=module.weight.dtype, recipe=recipe, **options)
    new.weight, new.bias = module.weight, module.bias
    new.reset_scaling_state(module.weight.device)
    new.train(module.training)
    return new


def convert(model: torch.nn.Module, recipe: str | recipes.Recipe = "mxfp8",
            filter_fn: Callable[[torch.nn.Module, str], bool] | None = None, **options) -> ConversionReport:
    """Swaps, in place, every eligible torch.nn.Linear of `model` (the model itself included only
    through its children) for an mx.torch.Linear with `recipe`; `options` go to mx.torch.Linear
    (parallel, group, amax_group, fuse_wgrad_accumulation). Returns the report."""
    recipe = recipes.get(recipe)
    report = ConversionReport(recipe)
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if not isinstance(child, torch.nn.Linear) or isinstance(child, Linear):
                continue
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            reason = _reason_to_skip(child, name, recipe, filter_fn)
            if reason is not None:
                report.skipped.append((name, reason))
                continue
            setattr(parent, child_name, swap(child, recipe, **options))
            report.swapped.append((name, child.in_features, child.out_features))
    return report
