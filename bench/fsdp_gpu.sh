#!/bin/bash
# The FSDP2 NCCL job on a 2-GPU machine, plain torchrun and traced side by side, then the planted
# divergence (bench/fsdp_job.py). Writes under $OUT: timings, info of both jobs, a fixture tarball.
# NVLink multicast stays off (the device notes require it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fsdp-out}; mkdir -p "$OUT"
N=${NPROC:-2}
ARGS=${FSDP_ARGS:-}
python -c "import torch; print(torch.__version__, torch.cuda.device_count(), torch.cuda.get_device_name())"
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d); }
fresh; t0=$EPOCHREALTIME
timeout 200 python -m torch.distributed.run --standalone --nproc-per-node $N bench/fsdp_job.py $ARGS > "$OUT/plain.log" 2>&1
echo "plain rc $? $(python3 -c "print(round($EPOCHREALTIME-$t0,1))") s"
fresh; t0=$EPOCHREALTIME
timeout 260 python -m tuidebug.cli trace --nproc-per-node $N --timeout 240 -o /tmp/fsdp-job bench/fsdp_job.py $ARGS > "$OUT/traced.log" 2>&1
echo "traced rc $? $(python3 -c "print(round($EPOCHREALTIME-$t0,1))") s"
fresh; t0=$EPOCHREALTIME
timeout 260 python -m tuidebug.cli trace --nproc-per-node $N --timeout 240 -o /tmp/fsdp-odd bench/fsdp_job.py --odd $ARGS > "$OUT/odd.log" 2>&1
echo "odd rc $? $(python3 -c "print(round($EPOCHREALTIME-$t0,1))") s"
for j in fsdp-job fsdp-odd; do
  COLUMNS=200 python -m tuidebug.cli info /tmp/$j > "$OUT/$j.info.txt" 2>&1
  python -m tuidebug.cli info --json /tmp/$j > "$OUT/$j.info.json" 2>/dev/null
  tar czf "$OUT/$j.tgz" -C /tmp $j
done
grep -h "rank . step" "$OUT"/plain.log | sort | head -8
echo "left running: $(pgrep -f fsdp_job.py | wc -l)"
head -c 2500 "$OUT/fsdp-odd.info.txt"
