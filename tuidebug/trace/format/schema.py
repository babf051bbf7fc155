"""Names and constants of the on-disk trace format (documented in docs/trace-format.md)."""

from __future__ import annotations

FORMAT_VERSION = 2  # 2: large files stored as NAME.gz (compressed.py)
FORMAT_NAME = "tuidebug-trace"

MANIFEST = "manifest.json"
CONFIG = "config.json"
RUNTIME = "runtime.json"
ADVICE = "advice.json"  # tuidebug advise --try: each suggestion tried, counts before and after
NUMERICS = "numerics.json"  # tuidebug numerics: each compile's kernels classified by re-runs
PROFILE = "profile.json"  # tuidebug trace --profile: measured kernels, FX nodes, compiled vs eager
VLLM = "vllm.json"  # an imported vLLM log: its compilation config, piecewise compiles, dumps
VLLM_DIR = "vllm"  # … and the graphs vLLM dumped, as text
VLLM_POST_GRAD = "vllm_post_grad"  # the subsystem of vLLM's post-grad passes (stages of a graph)
GRAPHS_DIR = "graphs"
COMPILES_DIR = "compiles"
EVENTS = "events.jsonl"
CACHE_SUFFIX = ".cache.json"  # compiles/<id>.cache.json: graph-cache lookups, key components
SHAPES_SUFFIX = ".shapes.json"  # compiles/<id>.shapes.json: symbols, guards, specializations
# compiles/<id>.shapes-brief.json: the same without the guards, with their counts (what info reads)
SHAPES_BRIEF_SUFFIX = ".shapes-brief.json"

# Per graph directory
META = "meta.json"
STAGES_DIR = "stages"
# a snapshot kept as the printed FX graph a log holds (read into the JSON shape when opened)
FX_TEXT_SUFFIX = ".txt"
IR_PRE = "ir_pre_fusion"
IR_POST = "ir_post_fusion"
FUSION = "fusion.jsonl"
CODE_DIR = "code"
KERNELS_INDEX = "code/kernels.json"
WRAPPER = "code/wrapper.py"
PROVENANCE = "provenance.json"
AUTOTUNE = "autotune.jsonl"
LAUNCHES = "code/launches.jsonl"  # Triton: launch metadata per kernel (first launch)
TIMINGS = "code/timings.json"  # compile time and run time per kernel
ERROR = "error.json"
COLLECTIVES = "collectives.json"  # the collectives a graph issues, in program order
REPRO_DIR = "repro"

# How an imported trace (TORCH_TRACE log, torch_compile_debug folder) names what its source lacks
NOT_IN_LOG = "not in this log; trace with tuidebug to get it"

STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_CRASHED = "crashed"
# a rank of a distributed job ended by `tuidebug trace --timeout` (the manifest's `stopped`)
STATUS_STOPPED = "stopped"
# what `info` and a job's rank record say of a trace whose compile was fine (ok) but whose
# script raised or exited non-zero: the script's outcome is the user's (`script_error`)
STATUS_SCRIPT_FAILED = "script_failed"

GRAPH_KINDS = ("inference", "forward", "backward")

# Compilation phases, in the order a compile goes through them. The manifest's "phase" is the
# last one reached; a crashed trace reports it.
PHASES = (
    "dynamo",
    "pre_grad",
    "aot",
    "joint_graph",
    "partition",
    "post_grad",
    "lowering",
    "scheduling",
    "codegen",
    "kernel_compile",
    "runtime",
)
