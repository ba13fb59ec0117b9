#!/bin/bash
# The planner's memory model against the engine's own accounting on this machine: for every
# layout tools/train runs (ZeRO-3, hybrid sharding, FSDP inside a pipeline, ZeroPP, PP x DP with
# ZeRO-1, a pure pipeline, ZeroPP with ZeRO-1 in bf16) and the 3D baseline's train_3d runs (tp x
# pp, with sequence parallelism, tp x dp, with the distributed optimizer), rank 0's model state as
# the engine counts it (the step line's "model-state X MB/rank", MemoryStats::ModelStateBytes) equals `plan
# --predict`'s prediction for pipeline rank 0 within 2% (or 0.06 MB: the log prints 0.1 MB), and so do the host tensor
# bytes rank 0 holds between steps (within 3% or 0.1 MB); offloaded to NVMe (parameters and
# optimizer, or the optimizer alone), the state in files and the state left in memory likewise.
# Then plan's refusals: zero GPUs, a model that fits nowhere (it names the smallest memory any
# layout needs), a global batch no layout can split, a layout's flag given to plan itself; and
# `--predict --trace`: the simulated step as Chrome trace JSON, one track per pipeline rank, its last
# event ending at the predicted step time; `--model PATH`: a Hugging Face config.json. ZeroPP with
# its weight passes' deferral capped: the peak tensor bytes measured and predicted.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
T3D="$RUNFILES/benchmarks/baseline_3d/train_3d"
PLAN="$RUNFILES/tools/plan"
HW="$RUNFILES/scheduler/planner/hardware/cpu-local.json"
FAILS=0
PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }
refused() {  # NAME PATTERN PLAN_ARGS...: plan exits 2 with one line matching PATTERN (a glob: exact without *)
  local name="$1" want="$2" out rc
  shift 2
  out="$("$PLAN" "$@" 2>&1)"; rc=$?
  if [[ $rc -eq 2 && "$out" == $want ]]; then pass "$name"; else fail "$name (rc=$rc): $out"; fi
}

MODEL=(--width 128 --depth 4 --heads 4 --context 32 --microbatches 4 --micro-batch 1 --steps 1 --log-every 1)
SHAPE=(--hidden 128 --layers 4 --heads 4 --vocab 256 --seq 32 --cpu-attention --hardware "$HW" --gpus 4
       --devices-per-node 4 --global-batch 16)
check() {  # check NAME "TRAIN FLAGS" "PLAN FLAGS" [PROGRAM: tools/train, or the 3D baseline's train_3d]
  local out engine predicted held
  out="$(OMP_NUM_THREADS=1 "$LAUNCHER" --nproc-per-node 4 -- "${4:-$TRAIN}" "${MODEL[@]}" $2 2>&1)"
  engine="$(grep -oP '(?<=model-state )[0-9.]+' <<<"$out" | head -1)"
  held="$(grep -oP '(?<=host-tensors )[0-9.]+' <<<"$out" | head -1)"
  predicted="$("$PLAN" --predict "${SHAPE[@]}" $3 | grep -oP '(?<=model_state_rank0_mb=)[0-9.]+')"
  if [[ -z "$engine" || -z "$predicted" ]]; then
    fail "$1: no number (engine '$engine', predicted '$predicted'): $out"
  elif python3 -c "import sys; e, p = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(p - e) <= max(0.02 * e, 0.06) else 1)" "$engine" "$predicted"; then
    pass "$1: engine $engine MB, predicted $predicted MB"
  else
    fail "$1: engine $engine MB, predicted $predicted MB"
  fi
  # What the rank's host tensors hold between steps is that model state and no more: a pipeline
  # stage does not keep the other stages' weights (Engine::ReleaseUnownedParameters).
  if [[ -n "$held" && -n "$predicted" ]] &&
     python3 -c "import sys; h, p = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(h - p) <= max(0.03 * p, 0.1) else 1)" "$held" "$predicted"; then
    pass "$1: host tensors between steps $held MB, predicted model state $predicted MB"
  else
    fail "$1: host tensors between steps '$held' MB, predicted model state '$predicted' MB"
  fi
}
check zero3_z4 "--pp 1 --zero 4" "--design zero3 --zero 4"
check hsdp_z2_dp2 "--pp 1 --zero 2 --dp 2" "--design zero3 --zero 2 --dp 2"
check fsdp_in_pp "--pp 2 --zero 2 --schedule 1f1b" "--design pipe-fsdp --schedule 1f1b --pp 2 --zero 2"
check zeropp_pp2_z2 "--pp 2 --zero 2 --schedule zeropp --unit-size 2" "--design zeropp --pp 2 --zero 2 --v 1 --u 2"
check pp2_dp2_zero1 "--pp 2 --zero 1 --dp 2 --dp-mode zero1 --schedule 1f1b" "--design 3d --pp 2 --dp 2 --zero1"
check pp4 "--pp 4 --zero 1 --schedule 1f1b" "--design 3d --pp 4"
# Megatron-style 3D (benchmarks/baseline_3d on zeropp's engine): each rank's TP slice, the
# replicated norms and biases whole, with and without the distributed optimizer.
check 3d_tp2_pp2 "--tp 2 --pp 2 --schedule 1f1b" "--design 3d --tp 2 --pp 2 --grad-accumulation sink" "$T3D"
check 3d_tp2_pp2_sp "--tp 2 --sp --pp 2 --schedule 1f1b" "--design 3d --tp 2 --sp --pp 2 --grad-accumulation sink" \
  "$T3D"
check 3d_tp2_dp2 "--tp 2 --dp 2" "--design 3d --tp 2 --dp 2 --grad-accumulation sink" "$T3D"
check 3d_tp2_dp2_zero1 "--tp 2 --dp 2 --dp-mode zero1" "--design 3d --tp 2 --dp 2 --zero1 --grad-accumulation sink" \
  "$T3D"
# bf16 parameters with the engine's default fp32 gradient shards (the planner's --reduce-fp32) and
# ZeRO-1 over 2 replicas of a ZeroPP pipeline: 2 + 4 bytes a parameter, and the fp32 master (4) and
# the moments (8) halved, each replica holding the part it updates; the description's compute dtype
# set to bf16.
BF16_HW="$(mktemp)"
sed 's/"compute_dtype": "fp32"/"compute_dtype": "bf16"/' "$HW" >"$BF16_HW"
if grep -q '"compute_dtype": "bf16"' "$BF16_HW"; then
  check zeropp_pp2_dp2_zero1_bf16 \
    "--pp 2 --zero 1 --dp 2 --dp-mode zero1 --schedule zeropp --unit-size 2 --param-dtype bf16" \
    "--design zeropp --pp 2 --zero 1 --dp 2 --v 1 --u 2 --zero1 --reduce-fp32 --hardware $BF16_HW"
else
  fail "zeropp_pp2_dp2_zero1_bf16: $HW names no compute_dtype fp32 to turn into bf16"
fi
rm -f "$BF16_HW"

# Offloaded to NVMe (ZeRO-Infinity): the engine's state in files ("X MB of state on nvme") equals
# the planner's nvme_mb within 2% or 0.06 MB, and what stays in memory (its model state less that)
# the planner's model_state_rank0_mb within 2% or 0.11 MB (a difference of two rounded numbers).
check_nvme() {  # check_nvme NAME "TRAIN FLAGS" "PLAN FLAGS"
  local out engine nvme predicted predicted_nvme dir
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/plan-offload.XXXXXX")"
  out="$(OMP_NUM_THREADS=1 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${MODEL[@]}" $2 --offload-dir "$dir" 2>&1)"
  rm -rf "$dir"
  engine="$(grep -oP '(?<=model-state )[0-9.]+' <<<"$out" | head -1)"
  nvme="$(grep -oP '[0-9.]+(?= MB of state on nvme)' <<<"$out" | head -1)"
  local line
  line="$("$PLAN" --predict "${SHAPE[@]}" $3)"
  predicted="$(grep -oP '(?<=model_state_rank0_mb=)[0-9.]+' <<<"$line")"
  predicted_nvme="$(grep -oP '(?<=nvme_mb=)[0-9.]+' <<<"$line")"
  if [[ -z "$engine" || -z "$nvme" || -z "$predicted" || -z "$predicted_nvme" ]]; then
    fail "$1: no number (engine '$engine', nvme '$nvme', predicted '$predicted', '$predicted_nvme'): $out"
  elif python3 -c "
import sys
e, n, p, pn = map(float, sys.argv[1:])
close = lambda a, b, tol: abs(a - b) <= max(0.02 * a, tol)
# e - n: two numbers the log rounds to 0.1 MB each
sys.exit(0 if n > 0 and close(n, pn, 0.06) and close(e - n, p, 0.11) else 1)" "$engine" "$nvme" "$predicted" "$predicted_nvme"; then
    pass "$1: engine $nvme MB on nvme, $engine MB in all; predicted $predicted_nvme MB on nvme, $predicted MB in memory"
  else
    fail "$1: engine $nvme MB on nvme, $engine MB in all; predicted $predicted_nvme MB on nvme, $predicted MB in memory"
  fi
}
check_nvme zero3_z4_offload_params_nvme "--pp 1 --zero 4 --offload-params nvme --offload-optimizer nvme --host-budget-mb 64" \
  "--design zero3 --zero 4 --offload-params nvme"
check_nvme zero3_z4_offload_optimizer_nvme "--pp 1 --zero 4 --offload-optimizer nvme --host-budget-mb 64" "--design zero3 --zero 4 --offload nvme"

# The most bytes the engine's tensors held at once (train's peak_tensor_mb, max over ranks) and
# plan's prediction for the same layout less its reserved part: "MEASURED PREDICTED" in MB.
peak_vs_plan() {  # peak_vs_plan NPROC "TRAIN FLAGS" "PLAN FLAGS"
  local out measured line
  out="$(OMP_NUM_THREADS=1 "$LAUNCHER" --nproc-per-node "$1" -- "$TRAIN" $2 --steps 2 --bench-warmup 1 \
    --log-every 100 2>&1)"
  measured="$(grep -oP '(?<=peak_tensor_mb=)[0-9.]+' <<<"$out" | head -1)"
  line="$("$PLAN" --predict --hardware "$HW" $3)"
  python3 -c "import re, sys; f = dict(re.findall(r'(\w+)=([0-9.]+)', sys.argv[1]))
print(sys.argv[2], round(float(f['mem_mb']) - float(f['reserved_mb']), 2))" "$line" "${measured:-nan}"
}

# ZeroPP's deferred weight passes capped (train --max-deferred-w), with the schedule's own deferral
# and with none: measured and predicted within 10%, and the cap saves memory in both.
peak_pair() {  # peak_pair CAP_FLAGS: "MEASURED PREDICTED" in MB
  peak_vs_plan 4 "--pp 2 --zero 2 --schedule zeropp --chunks 1 --microbatches 8 --unit-size 8 --micro-batch 2 \
    --width 128 --depth 4 --heads 4 --context 256 $1" "--hidden 128 --layers 4 --heads 4 --vocab 256 --seq 256 \
    --cpu-attention --gpus 4 --devices-per-node 4 --global-batch 32 --design zeropp --pp 2 --zero 2 --v 1 --u 8 \
    --micro-batch 2 --recompute $1"
}
read -r own_m own_p < <(peak_pair "")
read -r none_m none_p < <(peak_pair "--max-deferred-w 0")
if python3 -c "import sys; om, op, nm, np_ = map(float, sys.argv[1:])
ok = lambda m, p: abs(p - m) <= 0.1 * m
sys.exit(0 if ok(om, op) and ok(nm, np_) and nm < om and np_ < op else 1)" "$own_m" "$own_p" "$none_m" "$none_p"; then
  pass "zeropp deferral capped: peak tensors $own_m -> $none_m MB measured, $own_p -> $none_p MB predicted"
else
  fail "zeropp deferral capped: peak tensors $own_m -> $none_m MB measured, $own_p -> $none_p MB predicted"
fi

# One rank's activations per layer at context 512, where PyTorch's CPU attention (a flash kernel)
# keeps no s^2 tensor: the peak tensor bytes' growth from depth 4 to 8, measured and predicted
# (plan --cpu-attention; a dense core's 2 as^2 b would be 1.28x), within 10%, and each peak too.
layer_peak() {  # layer_peak DEPTH: "MEASURED PREDICTED" in MB
  peak_vs_plan 1 "--pp 1 --zero 1 --microbatches 1 --micro-batch 2 --width 256 --depth $1 --heads 4 --context 512" \
    "--hidden 256 --layers $1 --heads 4 --vocab 256 --seq 512 --cpu-attention --gpus 1 --global-batch 2 \
    --design zero3 --zero 1 --micro-batch 2"
}
read -r d4_m d4_p < <(layer_peak 4)
read -r d8_m d8_p < <(layer_peak 8)
if python3 -c "import sys; a, b, c, d = map(float, sys.argv[1:])
ok = lambda m, p: abs(p - m) <= 0.1 * m
sys.exit(0 if ok(c - a, d - b) and ok(a, b) and ok(c, d) else 1)" "$d4_m" "$d4_p" "$d8_m" "$d8_p"; then
  pass "activations per layer at context 512: peak tensors $d4_m -> $d8_m MB measured, $d4_p -> $d8_p MB predicted"
else
  fail "activations per layer at context 512: peak tensors $d4_m -> $d8_m MB measured, $d4_p -> $d8_p MB predicted"
fi

# On a CPU description the attention is PyTorch's CPU kernel unless --no-flash says otherwise: the
# same prediction as --cpu-attention, and less memory than a dense core that stashes its scores.
cpu_predict() { "$PLAN" --predict --hardware "$HW" --hidden 256 --layers 4 --heads 4 --vocab 256 --seq 512 --gpus 1 \
  --global-batch 2 --design zero3 --zero 1 --micro-batch 2 "$@" | grep '^PREDICT ' |
  grep -oP 'step_s=\S+ .*mem_mb=\S+'; }
plain="$(cpu_predict)" cpu="$(cpu_predict --cpu-attention)" dense="$(cpu_predict --no-flash)"
if [[ -n "$plain" && "$plain" == "$cpu" ]] && awk -v d="${dense##*mem_mb=}" -v p="${plain##*mem_mb=}" \
    'BEGIN { exit !(d + 0 > p + 0) }'; then
  pass "a CPU description prices PyTorch's CPU attention by default ($plain; --no-flash: ${dense##*mem_mb=} MB)"
else
  fail "CPU attention default: plain '$plain', --cpu-attention '$cpu', --no-flash '$dense'"
fi

refused "zero GPUs refused" "plan: --gpus: got 0, expected a whole number >= 1" --gpus 0 --hardware "$HW"
refused "a negative GPU count refused as zero is" "plan: --gpus: got -3, expected a whole number >= 1" \
  --gpus -3 --hardware "$HW"
refused "a schedule the design does not run is refused" \
  "plan: --schedule: got 'zeropp', but --design zero3 runs only its own schedule (zero3)" \
  --predict --design zero3 --zero 8 --schedule zeropp --gpus 8 --hardware "$HW"
# An output in a missing directory is refused before the plan runs: one line, nothing written.
missing="${TEST_TMPDIR:-/tmp}/no_such_dir/rank.png"
refused "--plot into a missing directory refused before planning" \
  "plan: --plot: got '$missing', expected a file in an existing directory ('${missing%/rank.png}' is not one)" \
  --gpus 8 --hardware "$HW" --plot "$missing"
# GPT-3 175B six times as wide: one gathered layer (65B parameters, 130 GB) outgrows the device.
out="$("$PLAN" --model gpt3-175b --hidden 73728 --ffn 294912 --gpus 8 --hardware "$RUNFILES/scheduler/planner/hardware/a100-80gb-ib400.json" 2>&1)"; rc=$?
if [[ $rc -eq 3 ]] && grep -qP '^plan: no layout fits gpt3-175b on 8 x a100-80gb-ib400: the smallest needs [0-9.]+ GB per device \(\S+\), the device has 80.0 GB$' <<<"$out"; then
  pass "a model that fits nowhere names the smallest need"
else
  fail "fits nowhere (rc=$rc): $out"
fi
out="$("$PLAN" --gpus 64 --global-batch 7 --hardware "$RUNFILES/scheduler/planner/hardware/a100-80gb-ib400.json" 2>&1)"; rc=$?
if [[ $rc -eq 3 ]] && grep -q '^plan: --global-batch: got 7, but no layout of zero3,zeropp,pipe-fsdp,3d splits it over 64 devices .*try a multiple of 64$' <<<"$out"; then
  pass "a global batch no layout can split is named"
else
  fail "unsplittable global batch (rc=$rc): $out"
fi
out="$("$PLAN" --gpus 8 --help 2>&1)"; rc=$?  # --help wins over any other flag, prints and exits 0
if [[ $rc -eq 0 && "$out" == "usage:"* ]] && grep -q "^model presets: .*llama2-7b" <<<"$out" &&
    grep -q -- "--predict LAYOUT" <<<"$out"; then
  pass "--help prints the usage and the presets"
else
  fail "--help (rc=$rc): $out"
fi
refused "an unknown flag is refused, pointing at --help" \
  "plan: unknown argument '--bogus'; expected one of * (--help: usage)" \
  --bogus
refused "a layout's flag given to plan is refused" \
  "plan: --micro-batch: sets one layout, for --predict or --estimate-memory;*" \
  --gpus 8 --micro-batch 2 --hardware "$HW"
trace="$(mktemp -d "${TEST_TMPDIR:-/tmp}/plan-trace.XXXXXX")/sim.json"
# Durations fixed at their means (compute_cv, comm_cv 0): the trace is then the predicted step itself
# (with variability it is the first of the runs whose mean is the prediction).
fixed="$(dirname "$trace")/fixed.json"
python3 -c "import json, sys; h = json.load(open(sys.argv[1])); h.pop('compute_cv', None); h.pop('comm_cv', None); \
json.dump(h, open(sys.argv[2], 'w'))" "$HW" "$fixed"
out="$("$PLAN" --predict "${SHAPE[@]}" --hardware "$fixed" --design pipe-fsdp --schedule 1f1b --pp 2 --zero 2 \
  --trace "$trace" 2>&1)"; rc=$?
step="$(grep -oP '(?<=step_s=)[0-9.]+' <<<"$out")"
if [[ $rc -eq 0 && -n "$step" ]] && python3 - "$trace" "$step" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
end = max(e["ts"] + e["dur"] for e in ev) / 1e6
sys.exit(0 if {e["tid"] for e in ev} == {0, 1} and abs(end - float(sys.argv[2])) <= 1e-6 + 1e-5 * end else 1)
PY
then
  pass "--trace: 2 tracks, ending at step_s=$step"
else
  fail "--trace (rc=$rc): $out"
fi
[[ ! -e "$trace.tmp" ]] || fail "--trace left its temporary file"
refused "--trace to an unwritable path refused" "plan: --trace: cannot write '/no/such/dir/t.json'" \
  --predict "${SHAPE[@]}" --design pipe-fsdp --schedule 1f1b --pp 2 --zero 2 --trace /no/such/dir/t.json
refused "--prefetch refused outside ZeRO-3" \
  "*prefetch(0): ZeRO-3 takes 0 or more units ahead; other designs take only 1*" \
  --predict "${SHAPE[@]}" --design zeropp --pp 2 --zero 2 --u 2 --prefetch 0
refused "an unknown gradient accumulation is refused" \
  "plan: --grad-accumulation: got 'copy', expected fused, autograd, fp32_add or sink" \
  --predict "${SHAPE[@]}" --design 3d --pp 2 --grad-accumulation copy
refused "--grad-accumulation refused outside 3D" "*grad_accumulation(sink) is a 3D executor's option*" \
  --predict "${SHAPE[@]}" --design zeropp --pp 2 --zero 2 --u 2 --grad-accumulation sink
refused "an idle link needs both its numbers" \
  "plan: --inter-idle-gbps and --inter-idle-latency-us: got one, expected both or neither" \
  --predict "${SHAPE[@]}" --design zero3 --zero 4 --inter-idle-gbps 1
refused "a wire latency over the link's latency is refused" \
  "plan: --inter-wire-latency-us: got 150, expected a number from 0 to the link's latency (100 us)" \
  --predict "${SHAPE[@]}" --design zero3 --zero 4 --inter-latency-us 100 --inter-wire-latency-us 150

# --model PATH: a Hugging Face config.json plans exactly as the preset of the same shape does (the
# ranked table identical line for line, the header naming the directory); a bad field is refused.
CFG="${TEST_TMPDIR:-/tmp}/Meta-Llama-3-8B"
mkdir -p "$CFG"
cat >"$CFG/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
 "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "tie_word_embeddings": false, "vocab_size": 128256}
JSON
H100="$RUNFILES/scheduler/planner/hardware/h100-80gb-ib400x8.json"
PLAN_ARGS=(--global-batch 64 --hardware "$H100" --gpus 16 --top 5)
from_cfg="$("$PLAN" --model "$CFG" "${PLAN_ARGS[@]}" 2>&1)"
from_preset="$("$PLAN" --model llama3-8b "${PLAN_ARGS[@]}" 2>&1)"
if [[ "$(head -1 <<<"$from_cfg")" == "plan: Meta-Llama-3-8B (8.03B parameters, seq 8192) on 16 x "* &&
      "$(tail -n +2 <<<"$from_cfg")" == "$(tail -n +2 <<<"$from_preset")" && "$from_cfg" == *"winner: "* ]]; then
  pass "--model CONFIG plans as the preset of its shape"
else
  fail "--model CONFIG: $from_cfg"$'\n'"preset: $from_preset"
fi
sed -i 's/"model_type": "llama"/"model_type": "gpt_neox"/' "$CFG/config.json"
refused "a config of a model type the planner does not price is refused" \
  "plan: --model $CFG/config.json: field 'model_type': got \"gpt_neox\", expected llama, mistral, qwen2 or gpt2*" \
  --model "$CFG" "${PLAN_ARGS[@]}"
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
