"""mx.torch: mx kernels as a PyTorch training integration.

    mx.torch.recipes           the recipe objects (mx.recipes): MXFP8, Blockwise, PerTensor, Delayed,
                               MXFP4, NVFP4; strings name their defaults
    mx.torch.Linear            a drop-in torch.nn.Linear computing forward and backward with mx kernels
    mx.torch.convert           swap a model's eligible nn.Linear layers for mx.torch.Linear, in place
    mx.torch.fsdp              FSDP2 with quantized weight all-gather, and the per-step scale all-reduce
    mx.torch.parallel          tensor / sequence-parallel Linear pairs with quantized all-gathers

The kernels are torch custom ops (`torch.ops.mx.*`, mx.torch._ops) with fake implementations, so
`torch.compile(fullgraph=True)` traces a converted model.
"""

from .. import recipes
from . import fsdp, parallel
from .convert import ConversionReport, convert
from .linear import Linear

__all__ = ["recipes", "Linear", "convert", "ConversionReport", "fsdp", "parallel"]
