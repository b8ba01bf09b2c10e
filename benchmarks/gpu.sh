#!/usr/bin/env bash
# The GPU run, prepared: one script that measures what a CUDA machine gives archdsl, in about
# 10 minutes, installing nothing, and prints one table.
#
#   1. train-step throughput of alter50 against resnet50 at the paper's batch 96 (32x32):
#      eager (float32, NCHW), bf16 autocast + channels_last, and the same compiled
#      (archdsl.optimize_model(training=True, compile=True)); benchmarks/throughput.py
#   2. one epoch of `archdsl train alter50` on the synthetic data, end to end, on the GPU
#   3. `archdsl analyze --metrics hessian --batches 2` on the checkpoint it wrote
#   4. scaling: the epoch of step 2 again, the same command launched by torchrun with one rank per
#      GPU when nvidia-smi lists 2 or more (2 CPU ranks in the fallback), against step 2's time.
#      It runs only when this checkout's `archdsl train` trains with DDP under torchrun (its --help
#      says "torchrun"); otherwise the table says it was skipped and why.
#
# Without CUDA (or with --cpu) it runs its CPU fallback: the same three steps, small (tiny-basic
# and tiny at batch 8, no compiling; `tiny` on 200 synthetic images, a cheap Hessian), so that
# the script cannot rot: tests/test_benchmarks.py runs the fallback as a slow test.
#
# Usage: benchmarks/gpu.sh [--cpu] [OUT_DIR]      (default OUT_DIR: a new temporary folder)
# PYTHON names the interpreter (default: .venv/bin/python if there is one, else python3).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$repo/.venv/bin/python" ]]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
force_cpu=0
if [[ "${1:-}" == "--cpu" ]]; then force_cpu=1; shift; fi
out="${1:-$(mktemp -d)}"
mkdir -p "$out"

if [[ $force_cpu == 0 ]] && "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    device=cuda
    models=resnet50,alter50
    throughput=(--batch 96 --warmup 10 --steps 30 --rounds 3)
    train=(alter50 --dataset synthetic --recipe deit --epochs 1 --batch-size 96 --workers 4)
    hessian=(--batches 2)
    compile=1
else
    device=cpu
    models=tiny-basic,tiny
    throughput=(--batch 8 --warmup 1 --steps 1 --rounds 1)
    train=(tiny --dataset synthetic:train=200,test=50 --recipe weak --epochs 1 --batch-size 50)
    hessian=(--batches 2 --hessian-batch-size 4 --k 1 --tol 1e-2)
    compile=0  # compiling on the CPU takes minutes and is not what this fallback checks
fi
echo "gpu.sh: device $device, results in $out" >&2

run_throughput() {  # NAME FLAGS...
    local name=$1
    shift
    "$PYTHON" "$repo/benchmarks/throughput.py" --device "$device" --models "$models" "${throughput[@]}" \
        --json "$out/throughput-$name.json" "$@" >&2
}
run_throughput eager
run_throughput bf16-channels_last --amp --channels-last
if [[ $compile == 1 ]]; then
    run_throughput bf16-channels_last-compiled --amp --channels-last --compile
fi

seconds() {  # COMMAND...: run it, print its wall time in seconds
    local start end
    start=$(date +%s.%N)
    "$@" >&2
    end=$(date +%s.%N)
    "$PYTHON" -c "print(f'{$end - $start:.1f}')"
}
train_s=$(seconds "$PYTHON" -m archdsl train "${train[@]}" --device "$device" --out "$out/train" --no-progress)
analyze_s=$(seconds "$PYTHON" -m archdsl analyze "$out/train/final.safetensors" --metrics hessian "${hessian[@]}" \
    --device "$device" --out "$out/analyze" --no-progress)

# 4. Scaling over ranks (data-parallel training of one network: issue 22).
ranks=2
if [[ $device == cuda ]]; then
    ranks=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
fi
ddp_s=""
if (( ranks < 2 )); then
    ddp_skip="fewer than 2 GPUs"
elif [[ "$("$PYTHON" -m archdsl train --help)" != *torchrun* ]]; then  # no pipe: grep -q's early exit fails it
    ddp_skip="this checkout's archdsl train has no torchrun (DDP) support"
else
    ddp_skip=""
    ddp_s=$(seconds "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node="$ranks" \
        -m archdsl train "${train[@]}" --device "$device" --out "$out/train-ddp" --no-progress)
fi

"$PYTHON" - "$out" "$train_s" "$analyze_s" "${train[0]}" "$ranks" "$ddp_s" "$ddp_skip" <<'EOF'
import json
import sys
from pathlib import Path

out, train_s, analyze_s, spec = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
ranks, ddp_s, ddp_skip = int(sys.argv[5]), sys.argv[6], sys.argv[7]
PAPER_ALTER50 = 473  # img/s: Alter-ResNet-50's training throughput in Park & Kim (2022), on their GPU
runs = [json.loads(path.read_text()) for path in sorted(out.glob("throughput-*.json"), key=lambda p: p.stat().st_mtime)]
eager = {r["name"]: r["images_per_second"] for r in runs[0]["results"]}
print(f"device {runs[0]['device']}, train-step batch {runs[0]['batch']}")
print(f"{'variant':<32}{'model':<10}{'img/s':>10}{'vs eager':>10}{'warm-up s':>11}")
best_alter = 0.0
for run in runs:
    variant = " + ".join(
        name for name, on in (("bf16", run["amp"]), ("channels_last", run["channels_last"]), ("compiled", run["compile"])) if on
    ) or "eager (fp32, NCHW)"
    for r in run["results"]:
        print(
            f"{variant:<32}{r['name']:<10}{r['images_per_second']:>10.1f}"
            f"{r['images_per_second'] / eager[r['name']]:>9.2f}x{r['warmup_s']:>11.1f}"
        )
        if r["name"].startswith("alter"):
            best_alter = max(best_alter, r["images_per_second"])
metrics = [json.loads(line) for line in (out / "train" / "metrics.jsonl").read_text().splitlines()]
print(f"archdsl train {spec}, 1 epoch end to end: {train_s:.1f} s ({metrics[-1]['img_per_s']:.0f} img/s in training)")
spectrum = json.loads((out / "analyze" / "metrics.json").read_text())["hessian"]
print(
    f"archdsl analyze --metrics hessian ({spectrum['batches']} batches): {analyze_s:.1f} s, "
    f"{spectrum['hvps']} Hessian-vector products, {spectrum['method']}"
)
if ddp_s:
    speedup = train_s / float(ddp_s)
    print(
        f"archdsl train {spec} under torchrun, {ranks} ranks, 1 epoch end to end: {float(ddp_s):.1f} s = "
        f"{speedup:.2f}x one rank's ({speedup / ranks:.0%} scaling efficiency)"
    )
else:
    print(f"archdsl train {spec} under torchrun: skipped ({ddp_skip})")
if runs[0]["device"].startswith("cuda"):
    print(f"best alter50 train step: {best_alter:.0f} img/s = {best_alter / PAPER_ALTER50:.2f}x the paper's {PAPER_ALTER50}")
EOF
