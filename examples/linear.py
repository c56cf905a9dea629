"""mx.torch.Linear: a few training steps of a small MLP whose linear layers compute in MXFP8.

mx.torch.Linear is a drop-in torch.nn.Linear: same constructor, parameters and state dict, but its
forward (fprop) and backward (dgrad, wgrad) GEMMs are mx.scaled_matmul kernels on quantized
operands. Here a two-layer MLP learns to imitate a fixed random teacher network for a few SGD steps,
next to a torch.nn.Linear copy of itself in bf16: both losses are printed. mx.torch.Linear runs on a
CUDA GPU (sm_90a or sm_100a); without torch and such a GPU this script says so and exits.

Run from the repository root:
    .venv/bin/python examples/linear.py
"""

import sys

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] not in (9, 10):
    print("examples/linear.py needs torch and a CUDA GPU (sm_90a or sm_100a): skipped")
    sys.exit(0)

import mx.torch  # noqa: E402  (needs torch)


def mlp(linear, **options):
    return torch.nn.Sequential(linear(256, 512, **options), torch.nn.GELU(), linear(512, 256, **options))


torch.manual_seed(0)
device, dtype = "cuda", torch.bfloat16
teacher = mlp(torch.nn.Linear).to(device, dtype)
model = mlp(mx.torch.Linear, recipe="mxfp8").to(device, dtype)   # the computation under test
baseline = mlp(torch.nn.Linear).to(device, dtype)                # the same weights, bf16 GEMMs
baseline.load_state_dict(model.state_dict())
optimizers = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (model, baseline)]

for step in range(5):
    x = torch.randn(128, 256, device=device, dtype=dtype)
    target = teacher(x).detach()
    losses = []
    for m, optimizer in zip((model, baseline), optimizers):
        loss = torch.nn.functional.mse_loss(m(x).float(), target.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print(f"step {step}: loss {losses[0]:.5f} (mx.torch.Linear, MXFP8)  {losses[1]:.5f} (torch.nn.Linear, bf16)")
assert all(torch.isfinite(p).all() for p in model.parameters()), "non-finite weights after training"
