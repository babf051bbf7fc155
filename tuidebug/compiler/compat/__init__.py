"""Every use of a private torch API in tuidebug lives in this package, feature-detected.

Torch internals move between releases. Each hook point is looked up by name when the traced
script first reaches the compiler (``first_compile``); one that the installed torch lacks is
reported as "not available in torch X" (a capture warning) instead of crashing, and the rest of
the capture goes on. What a hooked call was about reaches
capture as plain data (``hooks``): a signature that moves between torch releases is handled
here, not in capture. The compiler bisector (``tuidebug bisect``, its minify workers) is looked
up when a bisection starts; without it, it is that command which stops with "not available in
torch X".

Modules: ``lookup`` (NotAvailable, Patcher), ``hooks`` (hook points, call data, structured log
events), ``inductor`` (config, caches, counters, autotune feedback, scheduler nodes), ``kernels``
(Triton and C++ kernels, kernel timing), ``device`` (the device in use: synchronizing, a
call's clock marks, wall times, peak memory, peak bandwidth and FLOP/s), ``profiling`` (kernels
and FX nodes run under torch.profiler), ``caches`` (graph-cache lookups and their keys' components), ``shapes``
(symbols, guards, specializations, recompiled inputs), ``process`` (state a warm worker
resets), ``distributed`` (collectives in a graph, process groups, DDPOptimizer buckets, the
default group's store),
``collective_calls`` (torch.distributed's collective calls as hook points: a rank's progress),
``compiled_collectives`` (the collective op overloads compiled code calls),
``frames`` (frames Dynamo skipped, and why), ``tryout`` (a suggestion applied to a script
without editing it), ``bisector``, ``numerics`` (what Inductor lowered, the values its kernels write),
``compiled_backward`` (the autograd node a compiled graph's backward runs in),
``source_names`` (Dynamo's names for a graph's inputs and modules, read as the user's paths),
``schemas`` (which arguments an operator writes, from its schema), ``versions`` (a tensor's
version counter), ``after_import`` (a post-import hook), ``first_compile`` (where a script
first reaches the compiler; config changes applied as each config module loads).
Every name is importable from ``tuidebug.compiler.compat``; call them through it (a test or the
warm-up may replace one there).
"""

from tuidebug.compiler.compat.lookup import (  # noqa: F401
    TORCH_VERSION, NotAvailable, Patch, Patcher, mark_pending, own_frame_skipped,
)
from tuidebug.compiler.compat.hooks import (  # noqa: F401
    import_inductor, TORCH_COMPILE, OPTIMIZED_MODULE_CALL, optimized_module_class, COMPILE_FX,
    PRE_GRAD_PASSES,
    JOINT_GRAPH_PASSES, POST_GRAD_PASSES,
    CODEGEN_AND_COMPILE, GRAPH_LOWERING_RUN, PASS_OBSERVER_ENTER, PASS_OBSERVER_EXIT,
    IR_PRE_FUSION, IR_POST_FUSION, WHY_NO_FUSE, FUSE_TWO_NODES, CAN_FUSE, BACKEND_CAN_FUSE,
    KERNEL_PROVENANCE, TRITON_RUN, TRITON_BENCHMARK_ALL, BENCHMARK_CHOICE, TEMPLATE_PRECOMPILE,
    CUDAGRAPH_SKIP, COMPILE_TO_MODULE, CPP_BUILD, TRITON_COMPILE_METRIC,
    structured_trace_logger, current_compile_id, is_restart, compile_fx_call, stage_fn_graph,
    stage_fn_result, codegen_call, pass_observer, logged_scheduler_nodes, why_no_fuse_call,
    fusion_pair_names, fused_node, kernel_provenance, cpp_build_call, triton_compile_call,
    autotune_feedback, autotune_step_choice, cudagraph_skip_reason, triton_config_timings,
    is_boxed_call, copy_calling_convention, undisabled, backend_error_cause, StructuredEvent,
    structured_event,
)
from tuidebug.compiler.compat.inductor import (  # noqa: F401
    inductor_config_values, inductor_config_value, inductor_config_defaults,
    inductor_config_patch, CACHES_OFF, caches_off, caches_off_patch, set_flags,
    config_per_thread, loaded_config_modules, missing_flags,
    counters_snapshot, add_autotune_feedback, choice_info,
    ir_node_size, scheduler_node_json, scheduler_node_text, kernel_provenance_args,
)
from tuidebug.compiler.compat.kernels import (  # noqa: F401
    triton_available, triton_autotuner_identity, triton_launcher_info,
    is_autotune_choice_kernel, triton_launch_grid, cuda_graphs_enabled, triton_launchers,
    cpp_build_target, cpp_kernel_binary, is_triton_kernel, KernelCallTimer, triton_version,
    wrap_kernel,
)
from tuidebug.compiler.compat.device import (  # noqa: F401
    device_kind, peak_memory, wall_times, device_peaks, triton_kernel_estimates, synchronize,
    CallClock, free_device_bytes, call_device, call_devices, Devices,
)
from tuidebug.compiler.compat.profiling import (  # noqa: F401
    KernelRanges, NodeRanges, profiled, compiled_autograd_on,
)
from tuidebug.compiler.compat.caches import (  # noqa: F401
    cache_lookup, aot_cache_components,
)
from tuidebug.compiler.compat.process import (  # noqa: F401
    reset_dynamo, lowering_checkpoint, is_op_overload, has_fake_tensor, higher_order_name,
    COMPILE_STACK,
    import_compile_stack,
)
from tuidebug.compiler.compat.distributed import (  # noqa: F401
    COLLECTIVE_NAMESPACES, DDP_COMPILE_FN, collective_nodes, holds_distributed_tensor,
    process_group_info, this_rank,
    ddp_buckets, default_store, count_default_groups, default_groups,
)
from tuidebug.compiler.compat.shapes import (  # noqa: F401
    SHAPE_RECORDS, RECOMPILE_REASONS, shape_record, current_shape_env, shape_env_symbols,
    recompile_call,
)
from tuidebug.compiler.compat.bisector import (  # noqa: F401
    COMPILER_BISECTOR, BISECT_CALL_COUNTER, compiler_bisector, begin_bisect_run, end_bisect_run,
    run_bisect,
)
from tuidebug.compiler.compat.frames import FRAME_SKIP, frame_skip  # noqa: F401
from tuidebug.compiler.compat.tryout import applied  # noqa: F401
from tuidebug.compiler.compat.collective_calls import (  # noqa: F401
    collective_hook_points, collective_group, call_arguments, same_under_dynamo,
)
from tuidebug.compiler.compat.numerics import (  # noqa: F401
    COMPILED_GRAPH_CALL, lowered_graph, IntermediateValues, NodeValues,
)
from tuidebug.compiler.compat.source_names import (  # noqa: F401
    graph_input_sources, graph_input_names, source_names, source_name, placeholder_name,
    module_path,
)
from tuidebug.compiler.compat.compiled_backward import (  # noqa: F401
    compiled_backward_node, is_compiled_backward,
)
from tuidebug.compiler.compat.ddp_reducer import install as log_ddp_buckets  # noqa: F401
from tuidebug.compiler.compat.stand_in import stand_in  # noqa: F401
from tuidebug.compiler.compat.compiled_collectives import (  # noqa: F401
    WAIT_OP, collective_overloads, wrap_overload, real_tensors, call_arguments_of,
    compiled_call_group,
)
from tuidebug.compiler.compat.schemas import WrittenArgument, written_arguments  # noqa: F401
from tuidebug.compiler.compat.versions import version_counter  # noqa: F401
from tuidebug.compiler.compat.after_import import after_import  # noqa: F401
from tuidebug.compiler.compat.first_compile import (  # noqa: F401
    COMPILER_ENTRIES, FirstCompile, set_when_loaded,
)
