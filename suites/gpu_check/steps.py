"""The GPU check's steps: what each runs on which device, what it shows, and how long it is expected to take.

Order is value to a user of the box: the preflight and the timing self-checks (is anything here measured
right?), the matmul dtype ladder, flash vs naive attention, then the training step (GPT-2 124M in four
precisions eager and bf16 compiled: step wall time, device-busy time, compile start-up, MFU), then conv, the
numerics checks, traces, flash against do_bench, the largest batch, the telemetry sampler's cost, the other
precisions compiled (three cold compiles), and last a short achievable-peak search.

Each estimate is built from what it rests on (`Estimate`: subprocess start-up, groups of cases x seconds per
case under the profile's rule, cold torch.compile graphs, fixed work) and says so in `rests_on`;
tests/test_gpu_check.py holds every count of cases to the number its selection really collects. The CUDA figures
are reasoned from the full profile's rule, the sizes of each case and what each case does besides its samples
(cuDNN's algorithm search, float64 references, model builds, seeded steps), for an H200 (SXM, 141 GB): not yet
measured on a GPU. A run keeps each step's measured wall time per device identity (suites/gpu_check/step_times.py)
and the next plan on that device uses it instead. The CPU figures were measured on the 2-core development box
under load (load average about 5) and kept so, so that a busy CI machine fits them: on the quiet box the whole
CPU check ran in 51 s against 158 s estimated (`python -m suites.gpu_check --device cpu`).

A selection (`-k`) names cases by their ids; tests/test_gpu_check.py collects every selection of both plans
with pytest and checks that it holds what its readers look up (`Reader.gaps`).
"""

from __future__ import annotations

from dataclasses import dataclass

# What every step's subprocess costs before its first case and after its last: the imports (torch alone is
# 4.4 s on the 2-core box under load), CUDA's initialisation and context, pytest's collection, machine_info with
# its NVML queries, pytest-benchmark's JSON. Measured 9 s for a pytest run selecting nothing on the 2-core box
# under load; a GPU box is assumed quicker to import but to pay the CUDA context (unverified).
START_S = {"cuda": 8.0, "cpu": 9.0}
# A matmul case under the full rule: 0.1 s warm-up, at least 0.5 s of samples (a case ending at the plateau exit
# takes 30 samples of at least a millisecond), its inputs drawn on the CPU from the seed and copied over (45 M
# values for the 8192x50304x768 head), cuBLAS's heuristics on the first call, the float64 check, telemetry.
CUDA_GEMM_S = 1.5
# torch.compile of GPT-2 124M's forward and backward from cold caches, with compile workers on the box's cores
# (nanoGPT reports about a minute on an A100 box), and the one-time start-up of Dynamo, Inductor and Triton that
# the suite's warm_compiler pays once per process (unverified on a GPU).
COMPILE_GRAPH_S = 45.0
COMPILER_START_S = 10.0
# The steps a first contact with a GPU needs most, in the check's order: what the box is, whether the timer
# measures right, the dtype ladder, flash attention, the training step, conv, the numerics and the tensor-core
# traces. `--budget-s 420` (the first session's budget) schedules all of them; tests/test_gpu_check.py holds it.
FIRST_CONTACT = ("preflight", "timing", "matmul", "attention", "train_step", "conv", "numerics", "trace")


@dataclass(frozen=True)
class Cases:
    """`count` cases of about `seconds` each, and which cases they are when a step's cases differ (for --plan)."""

    count: int
    seconds: float
    which: str = ""

    def text(self) -> str:
        return f"{self.count} case{'s' if self.count != 1 else ''} x {self.seconds:g} s" + (
            f" ({self.which})" if self.which else "")


@dataclass(frozen=True)
class Estimate:
    """A step's expected seconds, from the parts they rest on."""

    start_s: float  # its subprocess: imports, CUDA context, collection, machine_info
    rests_on: str  # what the figures below assume, in words
    groups: tuple[Cases, ...] = ()  # its cases, in groups of like cost (the counts are checked against a collection)
    graphs: int = 0  # torch.compile graphs built from cold caches (plus the compiler's start-up, once)
    work_s: float = 0.0  # anything else: a probe's measurements, a search's budget

    @property
    def cases(self) -> int:
        return sum(group.count for group in self.groups)

    @property
    def seconds(self) -> float:
        compile_s = self.graphs * COMPILE_GRAPH_S + (COMPILER_START_S if self.graphs else 0.0)
        return self.start_s + sum(g.count * g.seconds for g in self.groups) + compile_s + self.work_s

    def parts(self) -> str:
        """`8 s start + 1 case x 25 s (fp32 eager) + ...`: the sum the estimate is, for --plan."""
        parts = [f"{self.start_s:g} s start", *(group.text() for group in self.groups)]
        if self.graphs:
            parts.append(f"{self.graphs} compile{'s' if self.graphs != 1 else ''} x {COMPILE_GRAPH_S:g} s "
                         f"+ {COMPILER_START_S:g} s compiler start-up")
        if self.work_s:
            parts.append(f"{self.work_s:g} s work")
        return " + ".join(parts)


@dataclass(frozen=True)
class Reader:
    """A function of a step's results that gives rows ("module:function" taking the --out folder and the step's
    name), and optionally one that names what a selection lacks for those rows ("module:function" taking the
    selected cases as dicts of `case` and params; an empty list: nothing lacks)."""

    rows: str
    gaps: str | None = None


@dataclass(frozen=True)
class StepPlan:
    """What a step does on one kind of device: a pytest run of a bench file (path and selection; `{out}` stands
    for --out), a probe ("module:function" taking (out, device), run in a subprocess) or a tool (a script of
    tools/ and its arguments); then its readers."""

    estimate: Estimate
    pytest_args: tuple[str, ...] = ()
    probe: str | None = None
    tool: tuple[str, ...] = ()
    readers: tuple[Reader, ...] = ()


@dataclass(frozen=True)
class CheckStep:
    """A step of the check: what it shows, a plan per device type (`cuda`, `cpu`; a device type without one is
    skipped), and the files and folders it writes under --out besides NAME.json, its journal and NAME.log."""

    name: str
    shows: str
    plans: dict[str, StepPlan]
    outputs: tuple[str, ...] = ()


def _pytest(device: str, rests_on: str, groups: tuple[Cases, ...], args: tuple[str, ...],
            readers: tuple[Reader, ...], graphs: int = 0, work_s: float = 0.0) -> StepPlan:
    return StepPlan(Estimate(START_S[device], rests_on, groups, graphs, work_s), args, readers=readers)


def _probe(device: str, rests_on: str, work_s: float, probe: str) -> StepPlan:
    return StepPlan(Estimate(START_S[device], rests_on, work_s=work_s), probe=probe)


MATMUL_READERS = (Reader("suites.gpu_check.matmul:dtype_ladder", "suites.gpu_check.matmul:ladder_gaps"),
                  Reader("suites.gpu_check.matmul:how_cases_stopped"),
                  Reader("suites.gpu_check.profiling:telemetry_of_run"))
ATTENTION_READERS = (Reader("suites.gpu_check.attention:flash_vs_naive", "suites.gpu_check.attention:pair_gaps"),)
TRAIN_READERS = (Reader("suites.gpu_check.train_step:precision_grid", "suites.gpu_check.train_step:grid_gaps"),
                 Reader("suites.gpu_check.train_step:steps_and_hosts"))
CONV_READERS = (Reader("suites.gpu_check.conv:formats_and_dtypes", "suites.gpu_check.conv:format_gaps"),)
NUMERICS_READERS = (Reader("suites.gpu_check.numerics:ran_once"),)
TRACE_READERS = (Reader("suites.gpu_check.profiling:trace_tensor_cores", "suites.gpu_check.profiling:trace_gaps"),)
BATCH_READERS = (Reader("suites.gpu_check.batch_size:largest_batches", "suites.gpu_check.batch_size:search_gaps"),)
SAMPLER_READERS = (Reader("suites.gpu_check.profiling:sampler_cost"),)
TRACE_ARGS = ("--trace-dir", "{out}/traces")
# The largest-batch searches under a memory budget: the levers' order in samples shows within 8 GiB in a few
# tries each; the H200's own largest batches (hundreds of samples, a step of seconds each) would take minutes.
BATCH_BUDGET = ("--bench-mem-budget", "8GiB")
SAMPLER_TOOL = ("bench_sampler_cost.py", "--seconds", "1", "--json", "{out}/sampler_cost.json")

STEPS: tuple[CheckStep, ...] = (
    CheckStep("preflight", "GPU, power limits, clocks and clock-event reasons, driver, CUDA, cuDNN, versions, a C "
              "compiler and Python.h for Triton and Inductor", {
                  "cuda": _probe("cuda", "NVML and torch.cuda queries", 2, "suites.gpu_check.preflight:preflight"),
                  "cpu": _probe("cpu", "measured 1 s of queries here", 1, "suites.gpu_check.preflight:preflight")}),
    CheckStep("timing", "a host-bound tiny add comes out host-bound; a bf16 gemm stops on its own; our median "
              "against torch.utils.benchmark and triton's do_bench", {
                  "cuda": _probe("cuda", "a tiny add under the full rule (~5 s to its plateau; 15 s at its "
                                 "timeout) and a 4096^3 bf16 gemm (~1 s); 3 rounds of ours and "
                                 "Timer.blocked_autorange at >= 0.5 s each (~4 s); triton's import (~3 s), our cold "
                                 "and hot medians at >= 1 s each and do_bench with NVML clocks (~4 s); inputs and "
                                 "float64 references (~3 s)", 22, "suites.gpu_check.timer_check:timing_checks"),
                  "cpu": _probe("cpu", "3 rounds of a 256^3 matmul, ours and Timer's (measured 4 s here)", 4,
                                "suites.gpu_check.timer_check:timing_checks")}),
    CheckStep("matmul", "the dtype ladder (best TFLOP/s and % of peak per dtype), alignment 4096/4104/4097, how "
              "every case stopped, telemetry of the run", {
                  "cuda": _pytest("cuda", "full rule; the square cubes in every dtype and the largest gemm, "
                                  "8192x50304x768, where the ladder's best usually is; 4097 in float8 is refused "
                                  "at once, counted as the others", (Cases(20, CUDA_GEMM_S),),
                                  ("bench/test_matmul.py", "-k", "square or 8192x50304x768"), MATMUL_READERS),
                  "cpu": _pytest("cpu", "quick rule, measured about 1 s per case here", (Cases(2, 1.0),),
                                 ("bench/test_matmul.py", "-k", "256x256x256 and (float32 or bfloat16)"),
                                 MATMUL_READERS)}),
    CheckStep("attention", "flash against naive attention (speed-up, memory) at 4k and 16k tokens, causal or "
              "not, forward and forward+backward", {
                  "cuda": _pytest("cuda", "full rule; naive at 16k tokens holds 8.6 GB of bf16 scores and takes "
                                  "tens of ms a call (100 ms with backward), and every case is checked against a "
                                  "float64 attention (34 GB of scores at 16k)", (
                                      Cases(4, 3.0, "naive at 16k tokens"), Cases(12, 1.5)),
                                  ("bench/test_attention.py", "-k", "bfloat16 and (flash or naive) and "
                                   "(4x16x4096x128 or 1x16x16384x128)"), ATTENTION_READERS),
                  "cpu": _pytest("cpu", "quick rule, measured 4 s for both cases here", (Cases(2, 2.0),),
                                 ("bench/test_attention.py", "-k", "bfloat16 and (flash or naive) and 1x2x128x128"),
                                 ATTENTION_READERS)}),
    CheckStep("train_step", "GPT-2 124M per precision, eager, and bf16 compiled: step wall time, device-busy "
              "time, host-bound or not, compile start-up, MFU, AdamW bytes per parameter", {
                  "cuda": _pytest("cuda", "batch 16 x 1024 tokens (about 14 TFLOP a step): a model build, 20 seeded "
                                  "steps, warm-up, 10-30 timed steps under the full rule and 5 profiled for busy "
                                  "time, about 55 steps a case: 280 ms a step in IEEE fp32 (67 TFLOP/s without "
                                  "tensor cores), about 100 ms in tf32, 50 ms in 16-bit; one cold compile", (
                                      Cases(1, 25.0, "fp32 eager"), Cases(1, 9.0, "tf32 eager"),
                                      Cases(3, 6.0, "amp_bf16 and amp_fp16 eager, amp_bf16 compiled")),
                                  ("bench/test_train_step.py", "-k",
                                   "gpt2-124m and (baseline or (precision and (eager or amp_bf16)))"),
                                  TRAIN_READERS, graphs=1),
                  "cpu": _pytest("cpu", "the tiny GPT's baseline under the quick rule, measured 15-20 s here",
                                 (Cases(1, 18.0),), ("bench/test_train_step.py", "-k", "gpt-tiny and baseline"),
                                 TRAIN_READERS)}),
    CheckStep("conv", "what channels-last and bfloat16 buy the 3x3 layers at 56x56 (ResNet-50's 64 channels, "
              "VGG-16's 256, misaligned 63, 65, 72)", {
                  "cuda": _pytest("cuda", "forward+backward of batch 32, bf16 in both formats and fp32 NCHW (the "
                                  "start a user comes from); per config cuDNN's benchmark search of its fwd, dgrad "
                                  "and wgrad algorithms on the first call (~1-2 s), the float64 reference (cuDNN's "
                                  "search again, then fp64 convolutions of up to 118 GFLOP each, ~1 s), then the "
                                  "full rule (~0.7 s)", (Cases(15, 3.5),),
                                  ("bench/test_conv.py", "-k",
                                   "k3s1 and x56x56 and fwd_bwd and (bfloat16 or (float32 and contiguous))"),
                                  CONV_READERS),
                  "cpu": _pytest("cpu", "quick rule, measured 14 s for the three cases here", (Cases(3, 4.5),),
                                 ("bench/test_conv.py", "-k",
                                  "1x64x14x14 and fwd_bwd and (bfloat16 or (float32 and contiguous))"), CONV_READERS)}),
    CheckStep("numerics", "every numerics check passes and runs once (formats, underflow, overflow, lost updates, "
              "the loss scaler, parity, autocast audits)", {
                  "cuda": _pytest("cuda", "run once each: checks of a few tensors, parity runs of 50 GPT-small steps "
                                  "in two precisions against fp32, autocast audits that build GPT-2 124M or "
                                  "ResNet-50 and run it with hooks", (
                                      Cases(13, 0.5, "a few tensors"), Cases(2, 4.0, "parity"),
                                      Cases(4, 5.0, "autocast audits")),
                                  ("bench/test_numerics.py",), NUMERICS_READERS),
                  "cpu": _pytest("cpu", "run once each, measured 6 s for the six checks here", (Cases(6, 1.0),),
                                 ("bench/test_numerics.py", "-k", "format or loss_scaler"), NUMERICS_READERS)}),
    CheckStep("trace", "profiler traces of the 4096-cube matmul: bf16 and tf32 run tensor-core kernels, IEEE fp32 "
              "none", {
                  "cuda": _pytest("cuda", "full rule, then 5 profiled calls and the trace's summary per case, and "
                                  "the profiler's (CUPTI's) start-up once", (Cases(3, 2.5),),
                                  ("bench/test_matmul.py", "-k", "square and 4096x4096x4096", "--bench-dtypes",
                                   "bfloat16,tf32,float32", *TRACE_ARGS), TRACE_READERS, work_s=3),
                  "cpu": _pytest("cpu", "quick rule and a CPU-only trace, measured 5 s here", (Cases(1, 5.0),),
                                 ("bench/test_matmul.py", "-k", "square and 256x256x256 and float32", *TRACE_ARGS),
                                 TRACE_READERS)},
              outputs=("traces",)),
    CheckStep("attention_do_bench", "the flash forward at 4k tokens, our median against triton's do_bench", {
        "cuda": _probe("cuda", "triton's import (~3 s), our cold and hot medians under the cross-check rule "
                       "(>= 1 s each), do_bench's 25 ms warm-up and 200 ms of repetitions, NVML clocks around both",
                       6, "suites.gpu_check.attention:flash_do_bench")}),
    CheckStep("batch_size", "the largest GPT-2 124M batch within 8 GiB for fp32, amp_bf16 and amp_bf16 with "
              "activation checkpointing: the memory levers in samples", {
                  "cuda": _pytest("cuda", "per search about 10 tries (doubling, then bisection; 10-80 samples), "
                                  "each a model build (~1.5 s), two steps and the allocator emptied, then the found "
                                  "batch timed under the full rule: about 22 s a search", (Cases(3, 22.0),),
                                  ("bench/test_batch_size.py", "-k",
                                   "max_batch and gpt2-124m and (checkpoint-off or amp_bf16)", *BATCH_BUDGET),
                                  BATCH_READERS)}),
    CheckStep("sampler_cost", "what NVML sampling costs a 10 ms kernel, against its noise floor", {
        "cuda": StepPlan(Estimate(START_S["cuda"], "the sampler loop for 2 x 1 s, sizing a 10 ms bf16 matmul, 6 "
                                  "measurements of it under the full rule (~0.7 s each)", work_s=8),
                         tool=SAMPLER_TOOL, readers=SAMPLER_READERS),
        "cpu": StepPlan(Estimate(START_S["cpu"], "the sampler loop for 2 x 1 s, measured 4 s here; no GPU part",
                                 work_s=4),
                        tool=SAMPLER_TOOL, readers=SAMPLER_READERS)}),
    CheckStep("train_step_compiled", "the rest of the precision x compile grid: GPT-2 124M fp32, tf32 and "
              "amp_fp16 compiled", {
                  "cuda": _pytest("cuda", "three cold compiles (other dtypes, other kernels), then each case's "
                                  "build, seeded and timed steps as in train_step (fp32 at about 250 ms a step)", (
                                      Cases(1, 22.0, "fp32"), Cases(2, 7.0, "tf32, amp_fp16")),
                                  ("bench/test_train_step.py", "-k",
                                   "gpt2-124m and precision and compiled and not amp_bf16"), TRAIN_READERS, graphs=3)}),
    CheckStep("achievable", "a short achievable-peak search (bf16 and fp8 gemms, memory bandwidth) beside the "
              "datasheet peaks", {
                  "cuda": _probe("cuda", "20 s per dtype over the full plan's shapes (a lower bound of its 60 s "
                                 "search), 5 s of copy and triad, each part over by at most its last shape", 47,
                                 "suites.gpu_check.matmul:achievable_search"),
                  "cpu": _probe("cpu", "3.5 s per dtype and 2 s of bandwidth, measured 11 s here", 11,
                                "suites.gpu_check.matmul:achievable_search")},
              outputs=("achievable.json",)),
)
STEP_NAMES = tuple(step.name for step in STEPS)
PROFILE = {"cuda": "full", "cpu": "quick"}  # the profile each device type's pytest steps run
