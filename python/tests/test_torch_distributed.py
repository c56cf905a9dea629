"""mx.torch across 2 processes on the CPU (torch.distributed on gloo, the kernels on the CPU pipeline):
for every recipe mx.torch.Linear trains (the FP8 ones, MXFP4 and NVFP4), FSDP2 with the quantized weight all-gather and a sequence-parallel
column/row-parallel pair train the loss curve of one process on the same global batches; FSDP2
training resumed from a saved state dict is bit-identical; the gathered weights of the first step
are mx.reference's quantize of the whole weights, bit for bit;
a sharded quantize followed by the quantized all-gather is the quantize of the whole tensor; the
bytes counted in the all-gathers show that FP8 (or FP4) crossed the wire (at most 0.52x bf16 FSDP2's);
the transposed GEMM operands are the row operands' bytes transposed, and FSDP2 makes per-tensor and
delayed ones without a byte transpose; FSDP2 keeping the weights unsharded after forward trains the
same losses and puts no more bytes on the wire.
test_gpu_torch_distributed.py runs the same cases on 2 GPUs. Needs torch; skipped without it.
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("needs torch.distributed with gloo", allow_module_level=True)

import distributed_cases as cases  # noqa: E402

WORLD = cases.WORLD
# Relative loss difference allowed against one process: the GEMMs' K is split (wgrad over the
# data-parallel token shards, the row-parallel layer's K) and per-tensor FSDP2 casts shards with
# maxfinite / amax where one process divides by amax / maxfinite (docs/torch.md).
TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def device():
    return "cpu"  # test_gpu_torch_distributed.py runs these tests with "cuda"


@pytest.fixture(scope="module")
def runs(device):
    results = {}

    def run(recipe):
        if recipe not in results:
            results[recipe] = cases.spawn("everything", device, recipe)
        return results[recipe]
    return run


def _close(curve, reference):
    return all(abs(a - b) <= TOLERANCE * abs(b) for a, b in zip(curve, reference))


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_fsdp2_matches_one_process(runs, device, recipe):
    ranks = runs(recipe)
    single = cases.single(recipe, device)
    for rank in ranks:
        assert rank["fsdp"]["weights_equal"], f"{recipe}: gathered weights differ from the whole weight's quantize"
        assert rank["fsdp"]["losses"] == ranks[0]["fsdp"]["losses"]
    assert _close(ranks[0]["fsdp"]["losses"], single), (ranks[0]["fsdp"]["losses"], single)


# The recipes whose weight's transposed operand can be its rowwise bytes transposed (one scale, 128x128).
COL_DERIVABLE = ("blockwise", "per_tensor", "delayed")
# ... and whose quantize writes it itself, sharded or not (cast+transpose).
CAST_TRANSPOSE = ("per_tensor", "delayed")


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_fsdp2_transposed_operands(runs, recipe):
    """Under FSDP2 (resharding after forward), the col operands of the weights, inputs and output
    gradients equal their row operands transposed, bit for bit, wherever they can: per-tensor and
    delayed weights are gathered as cast+transposed shards [cols, rows / 2] put together along
    their columns, so a misplaced shard fails here (the weights are not square), and none of their
    operands is a byte transpose; 128x128 weights transpose the gathered rowwise bytes."""
    for rank in runs(recipe):
        checked = rank["fsdp"]["operands"]
        assert checked["bad"] == [], f"{recipe}: col operands differ from the row operands transposed"
        if recipe in COL_DERIVABLE:  # both weights, every step, at least
            assert checked["checked"] >= 2 * cases.STEPS, checked
        if recipe in CAST_TRANSPOSE:
            assert checked["transposes"] == 0, checked


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_fsdp2_kept_unsharded_gathers_each_part_once(runs, recipe):
    """reshard_after_forward=False: forward gathers what backward reads too, and trains the same
    losses, bit for bit. No pass gathers more: a weight whose col operand derives from its rowwise
    bytes gathers only those (half of the two gathers of resharding, then a byte transpose per weight
    and step), the others both usages at once (what resharding gathers in two passes). The bf16
    biases are gathered as they are, in every pass."""
    bias = (cases.HIDDEN + cases.WIDTH) * 2 // WORLD  # bf16 biases: gathered in every pass
    share = 0.5 if recipe in COL_DERIVABLE else 1
    for rank in runs(recipe):
        kept, resharded = rank["fsdp_kept"], rank["fsdp"]
        assert kept["weights_equal"] and kept["losses"] == resharded["losses"]
        weights = [sent - 2 * bias for sent in resharded["bytes"]]
        assert [sent - bias for sent in kept["bytes"]] == [share * w for w in weights], (kept["bytes"], weights)
        if recipe in CAST_TRANSPOSE:
            assert kept["operands"]["transposes"] == 2 * cases.STEPS, kept["operands"]


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_fsdp2_resume_from_state_dict_is_bit_identical(runs, recipe):
    assert all(rank["fsdp_resume"] for rank in runs(recipe)), f"{recipe}: resumed losses differ"


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_fsdp2_gathers_fp8(runs, recipe):
    """Bytes a rank sends in a training step's all-gathers (forward, and backward's re-gather):
    at most 0.52x those of bf16 FSDP2 for the same model."""
    fp8, bf16 = runs(recipe)[0]["fsdp"]["bytes"], runs(None)[0]["fsdp"]["bytes"]
    assert fp8[0] == fp8[-1] and bf16[0] == bf16[-1]
    assert fp8[0] <= 0.52 * bf16[0], f"{recipe}: {fp8[0]} bytes against bf16's {bf16[0]}"


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_sequence_parallel_matches_one_process(runs, device, recipe):
    ranks = runs(recipe)
    single = cases.single(recipe, device)
    curve = ranks[0]["sequence_parallel"]["losses"]
    assert ranks[1]["sequence_parallel"]["losses"] == curve
    assert _close(curve, single), (curve, single)
    # Per step: the input's rowwise parts (forward), its columnwise ones (backward), the output
    # gradient's (both usages, or the rowwise bytes where the transposed operand derives from them):
    # FP8 bytes plus scales, against 2 bytes an element for bf16.
    elements = cases.TOKENS // WORLD * cases.WIDTH
    per_usage = {"mxfp8": 1 + 1 / 32, "blockwise": 1 + 4 / 128, "mxfp4": 0.5 + 1 / 32,
                 "nvfp4": 0.5 + 1 / 16}.get(recipe, 1)
    usages = 4 if recipe in ("mxfp8", "blockwise", "mxfp4", "nvfp4") else 3
    assert ranks[0]["sequence_parallel"]["bytes"][0] == round(usages * per_usage * elements)
    # The input's col operand: its cast+transposed shards gathered; the output gradient's (read
    # both ways, gathered rowwise once): its bytes transposed, once a step.
    checked = ranks[0]["sequence_parallel"]["operands"]
    assert checked["bad"] == [], f"{recipe}: col operands differ from the row operands transposed"
    if recipe in CAST_TRANSPOSE:
        assert checked["transposes"] == cases.STEPS, checked


@pytest.mark.parametrize("recipe", cases.FUSED_RECIPES)
def test_sequence_parallel_fused_wgrad_accumulation(runs, recipe):
    """mx.torch.parallel's layers with fuse_wgrad_accumulation: each rank's wgrad GEMM adds its
    shard's dW to a zeroed f32 main_grad, which (cast to the weight's dtype) is the plain wgrad's
    rounding of the same f32 sum: the loss curve is the unfused one, bit for bit."""
    for rank in runs(recipe):
        assert rank["sequence_parallel_fused"]["losses"] == rank["sequence_parallel"]["losses"]


@pytest.mark.parametrize("recipe", cases.RECIPES)
def test_sharded_quantize_and_gather_equal_whole_quantize(runs, recipe):
    for rank in runs(recipe):
        assert rank["sharded_quantize"] == [], f"{recipe}: parts {rank['sharded_quantize']} differ"


def test_plans_builds_every_program(runs, device):
    """cases.plans (what a GPU machine's cache gets ahead of time) builds every plan the runs used."""
    from mx.torch import _ops
    target = _ops.target_of(torch.empty(0, device=device))
    cases.plans(target)
    used = {key for recipe in cases.RECIPES for key in runs(recipe)[0]["plans"]}
    assert used <= set(_ops._PLANS), sorted(used - set(_ops._PLANS))


def test_launch_reports_a_failing_rank(device):
    """A rank that raises fails launch, while the ranks that return leave without the interpreter's
    finalization (mx.torch.distributed.launch). torch.multiprocessing reports the first rank it sees
    fail: the raising one, or another whose barrier lost its peer."""
    with pytest.raises(torch.multiprocessing.ProcessRaisedException):
        cases.spawn("fails_on_last_rank", device)
