#!/bin/bash
# Issue 26 on one GPU: three `trace --profile` runs of the bf16 transformer example and of the
# graph-break model, each against bench/compile_vs_eager.py (torch.compile vs eager interleaved,
# without tuidebug), then bench/perf_verdict_check.py: per configuration the three verdicts, the
# bench's ratio, and each run's ledger with its remainder (PASS when under 10%). Writes under $OUT.
# Then bench/interleave_order.py on the graph-break model: its ratio timed alternating, primed
# (each timed call after an untimed one of its own, as fair_timing does) and in blocks; and
# bench/after_profile.py: the program's calls timed before and after one profiler session
# (none, plain torch.profiler, capture's compat.profiled), each in a process of its own.
#   OUT=/tmp/perf-out bash bench/perf_gpu.sh
#   ONLY=item_per_layer OUT=/tmp/perf-out bash bench/perf_gpu.sh    # the graph-break model alone
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/perf-out}; mkdir -p "$OUT"
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
run() {  # name, then the example and its arguments
  local name=$1; shift
  [[ -n $ONLY && $name != "$ONLY" ]] && return
  local example=$1; shift
  local model=transformer; [[ $example == *item_per_layer* ]] && model=item_per_layer
  for i in 1 2 3; do
    rm -rf "/tmp/perf-$name-$i"
    timeout 900 python -m tuidebug.cli trace --profile 20 -o "/tmp/perf-$name-$i" "$example" \
      --device cuda "$@" > "$OUT/$name.run$i.log" 2>&1
    echo "$name run $i rc $?"
    python -m tuidebug.cli info --json "/tmp/perf-$name-$i" > "$OUT/$name.run$i.info.json" 2>/dev/null
    COLUMNS=160 python -m tuidebug.cli info "/tmp/perf-$name-$i" > "$OUT/$name.run$i.info.txt" 2>&1
    cp "/tmp/perf-$name-$i/profile.json" "$OUT/$name.run$i.profile.json" 2>/dev/null
  done
  timeout 600 python bench/compile_vs_eager.py --model $model --device cuda "$@" \
    > "$OUT/$name.bench.json" 2>"$OUT/$name.bench.log"
  echo "$name bench rc $?"
}
run bf16_small examples/transformer_block.py --dtype bfloat16
run bf16_1024 examples/transformer_block.py --dtype bfloat16 --layers 4 --dim 1024 --heads 16 --seq 512 --batch 8
run item_per_layer examples/item_per_layer.py --layers 8
timeout 300 python bench/interleave_order.py --device cuda --layers 8 \
  > "$OUT/interleave_order.json" 2>"$OUT/interleave_order.log"
echo "interleave_order rc $?"; cat "$OUT/interleave_order.json"
for s in none torch tuidebug; do  # the program's calls before and after one profiler session
  timeout 120 python bench/after_profile.py --session $s --device cuda >> "$OUT/after_profile.json" 2>>"$OUT/after_profile.log"
done
cat "$OUT/after_profile.json"
python bench/perf_verdict_check.py "$OUT" | tee "$OUT/check.txt"
