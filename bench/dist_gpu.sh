#!/bin/bash
# Distributed jobs on GPUs (NCCL), for issue 28: run from the repository root on a machine with 4
# GPUs (the 2-GPU parts use GPUs 0 and 1). NVLink multicast stays off (the device notes require it).
#   OUT=/tmp/dist-out bash bench/dist_gpu.sh
# 1. the compiled-collective hang on 2 GPUs, ended by --timeout: where each rank waits
# 2. FSDP2 x tensor parallel on a 2x2 mesh (4 GPUs): plain torchrun vs traced (wall ratio, same
#    losses), then the planted divergence (--odd) traced
# 3. the DDP job that compiles no Inductor graph: plain vs traced exit codes and output (2 GPUs)
# 4. a hang in DDP's bucket all-reduces (its C++ reducer) on 2 GPUs: where each rank waits
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/dist-out}; mkdir -p "$OUT"; rm -rf /tmp/chang /tmp/tp-job /tmp/tp-odd /tmp/ddp-job /tmp/ddphang
python -c "import torch; print(torch.__version__, torch.cuda.device_count(), torch.cuda.get_device_name())"
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d); }
secs() { python3 -c "print(round($EPOCHREALTIME-$1,1))"; }

# a hang on 2 GPUs ended by --timeout: NAME SCRIPT; info, the progress logs and stacks to $OUT
hang() {
  fresh; local t0=$EPOCHREALTIME
  CUDA_VISIBLE_DEVICES=0,1 timeout 300 python -m tuidebug.cli trace --nproc-per-node 2 \
    --timeout 120 -o /tmp/$1 $2 > "$OUT/$1.log" 2>&1
  echo "$1: rc $? $(secs $t0) s"
  COLUMNS=200 python -m tuidebug.cli info /tmp/$1 > "$OUT/$1.info.txt" 2>&1
  python -m tuidebug.cli info --json /tmp/$1 > "$OUT/$1.info.json" 2>/dev/null
  for f in /tmp/$1/job/*.progress.jsonl /tmp/$1/job/*.stacks.txt; do
    cp "$f" "$OUT/$1.$(basename "$f")" 2>/dev/null; done
  echo "left running: $(pgrep -f "$(basename $2)" | wc -l)"
  tail -12 "$OUT/$1.info.txt"
}

hang chang bench/compiled_hang_job.py

fresh; t0=$EPOCHREALTIME
timeout 300 python -m torch.distributed.run --standalone --nproc-per-node 4 bench/fsdp_tp_job.py > "$OUT/tp-plain.log" 2>&1
echo "fsdp x tp plain: rc $? $(secs $t0) s"
fresh; t0=$EPOCHREALTIME
timeout 400 python -m tuidebug.cli trace --nproc-per-node 4 --timeout 360 -o /tmp/tp-job bench/fsdp_tp_job.py > "$OUT/tp-traced.log" 2>&1
echo "fsdp x tp traced: rc $? $(secs $t0) s"
fresh; t0=$EPOCHREALTIME
timeout 400 python -m tuidebug.cli trace --nproc-per-node 4 --timeout 360 -o /tmp/tp-odd bench/fsdp_tp_job.py --odd > "$OUT/tp-odd.log" 2>&1
echo "fsdp x tp --odd traced: rc $? $(secs $t0) s"
echo "same losses plain vs traced: $(diff <(grep -ho 'rank . (dp . tp .) step . seq [0-9]*: loss [-0-9.]*' "$OUT/tp-plain.log" | sort) <(grep -ho 'rank . (dp . tp .) step . seq [0-9]*: loss [-0-9.]*' "$OUT/tp-traced.log" | sort) > /dev/null && echo yes || echo NO)"
for j in tp-job tp-odd; do
  COLUMNS=200 python -m tuidebug.cli info /tmp/$j > "$OUT/$j.info.txt" 2>&1
  python -m tuidebug.cli info --json /tmp/$j > "$OUT/$j.info.json" 2>/dev/null
done
echo "left running: $(pgrep -f fsdp_tp_job.py | wc -l)"
head -c 3000 "$OUT/tp-odd.info.txt"

fresh
CUDA_VISIBLE_DEVICES=0,1 timeout 300 python -m torch.distributed.run --standalone --nproc-per-node 2 tests/distributed/rank_job.py ddp > "$OUT/ddp-plain.log" 2>&1
echo "ddp plain: rc $?"
fresh
CUDA_VISIBLE_DEVICES=0,1 timeout 300 python -m tuidebug.cli trace --nproc-per-node 2 -o /tmp/ddp-job tests/distributed/rank_job.py ddp > "$OUT/ddp-traced.log" 2>&1
echo "ddp traced: rc $?"
grep -h "^rank .: loss" "$OUT/ddp-plain.log" "$OUT/ddp-traced.log"

hang ddphang bench/ddp_hang_job.py
