#!/usr/bin/env bash
# Every GPU check in one call, for a session lent a GPU (see DEVELOPERS.md). Writes to ${OUT:-gpu-out}.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
} 2>&1 | tee "$OUT/machine.txt"
timeout 150 $PY benchmarks/gpu_check.py --model wrn-16-4 --methods trades rlfat wscat mt 2>&1 \
  | tee "$OUT/gpu_check.txt"
for cfg in "bf16 --precision bf16 --channels-last --deterministic" \
           "bf16-fast --precision bf16 --channels-last" "fp32"; do
  set -- $cfg; tag=gpu-$1; shift
  timeout 90 $PY benchmarks/throughput.py --device cuda --models wrn-28-10 --batch 128 \
    --methods trades wscat --tag "$tag" "$@" 2>&1 | tail -4
  cat benchmarks/results/$tag.md >> "$OUT/throughput.md" 2>/dev/null
  cp benchmarks/results/$tag.json "$OUT/" 2>/dev/null
done
timeout 130 $PY benchmarks/gpu_pipeline.py --model wrn-16-4 2>&1 | grep -v Warning | tee "$OUT/pipeline.txt"
