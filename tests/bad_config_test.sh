#!/bin/bash
# Bad configurations, as flags and as JSON files, each refused by the training job: a non-zero
# exit, one error line per rank that names the field and the value ("[rank R] error: ..."),
# the rank named once, no stack trace on the terminal, no file written, no hang (60 s each).
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/badcfg.XXXXXX")"
WORK="$TMP/out"; CFG="$TMP/cfg"; mkdir -p "$WORK" "$CFG"
export ZEROPP_LOG_DIR="$TMP"
FAILS=0; PASSES=0
OUT=(--metrics "$WORK/m.jsonl" --trace "$WORK/t")
SMALL=(--steps 2 --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2)

# check NPROC EXPECTED ARGS...
check() {
  local nproc="$1" want="$2"; shift 2
  local out rc
  out="$(timeout 60 "$LAUNCHER" --nproc-per-node "$nproc" -- "$TRAIN" "$@" 2>&1)"; rc=$?
  local errs; errs="$(grep 'error:' <<<"$out")"
  local why=""
  [[ $rc -eq 0 ]] && why="exit 0"
  [[ $rc -eq 124 ]] && why="hung (timeout)"
  [[ -z "$errs" ]] && why="$why; no error line"
  grep -qvP '^\[rank [0-9]+\] error: ' <<<"$errs" && why="$why; an error line without exactly one rank prefix"
  grep -q 'error: \[rank' <<<"$errs" && why="$why; rank named twice"
  [[ $(grep -c 'error:' <<<"$out") -gt "$nproc" ]] && why="$why; more than one error line per rank"
  grep -qF -- "$want" <<<"$errs" || why="$why; expected '$want'"
  grep -qE 'frame #|Exception raised from|terminate called' <<<"$out" && why="$why; a stack trace on the terminal"
  [[ -n "$(ls -A "$WORK")" ]] && why="$why; wrote $(ls "$WORK")" && rm -rf "${WORK:?}"/*
  if [[ -z "$why" ]]; then
    echo "PASS: $* -> $(head -1 <<<"$errs")"; PASSES=$((PASSES + 1))
  else
    echo "FAIL: $* :$why (rc=$rc): $out"; FAILS=$((FAILS + 1))
  fi
}
json() {  # json NAME TEXT -> path
  printf '%s' "$2" >"$CFG/$1.json"; echo "$CFG/$1.json"
}

# Integers: range-checked before narrowing (a huge --pp must not wrap around).
check 1 "pp: got '4294967298', expected an integer in [1, 2147483647]" "${SMALL[@]}" "${OUT[@]}" --pp 4294967298
check 1 "pp: got '0', expected an integer in [1, 2147483647]" "${SMALL[@]}" "${OUT[@]}" --pp 0
check 1 "steps: got '-5', expected an integer in [1," "${SMALL[@]}" "${OUT[@]}" --steps -5
check 1 "threads: got '0', expected an integer in [1, 2147483647]" "${SMALL[@]}" "${OUT[@]}" --threads 0
check 1 "chunks: got '99999999999'" "${SMALL[@]}" "${OUT[@]}" --chunks 99999999999
check 1 "micro-batch: got 'two'" "${SMALL[@]}" "${OUT[@]}" --micro-batch two
check 1 "device: got 'tpu', expected cpu or cuda" "${SMALL[@]}" "${OUT[@]}" --device tpu
check 1 "backend: got 'mpi', expected auto, gloo or nccl" "${SMALL[@]}" "${OUT[@]}" --backend mpi
check 2 "backend(nccl) needs device(cuda)" "${SMALL[@]}" "${OUT[@]}" --backend nccl
# A CPU build (or a machine without a GPU) refuses cuda, saying which and how to get it.
check 2 "device: got 'cuda', but" "${SMALL[@]}" "${OUT[@]}" --device cuda
# Floats: finite and in range.
check 1 "lr: got 'inf', expected a finite number in [0, 10]" "${SMALL[@]}" "${OUT[@]}" --lr inf
check 1 "lr: got 'nan', expected a finite number" "${SMALL[@]}" "${OUT[@]}" --lr nan
check 1 "lr: got '1e400', expected a finite number" "${SMALL[@]}" "${OUT[@]}" --lr 1e400
check 1 "weight-decay: got 'nan', expected a finite number" "${SMALL[@]}" "${OUT[@]}" --weight-decay nan
check 1 "weight-decay: got '-1', expected a finite number in [0, 10]" "${SMALL[@]}" "${OUT[@]}" --weight-decay -1
check 1 "clip: got 'inf', expected a finite number" "${SMALL[@]}" "${OUT[@]}" --clip inf
check 1 "min-lr-ratio: got '2', expected a finite number in [0, 1]" "${SMALL[@]}" "${OUT[@]}" --min-lr-ratio 2
# Enums.
check 1 "schedule: got 'foo', expected one of: auto, gpipe, 1f1b, interleaved, zeropp, zb-h1" "${SMALL[@]}" "${OUT[@]}" --schedule foo
check 1 "pipeline-recompute: got 'some', expected one of: default, none, all-but-last, all" "${SMALL[@]}" "${OUT[@]}" --pipeline-recompute some
check 1 "partition: got 'random', expected one of: parameters, uniform" "${SMALL[@]}" "${OUT[@]}" --partition random
check 1 "offload-optimizer: got 'disk', expected one of: none, cpu, nvme" "${SMALL[@]}" "${OUT[@]}" --offload-optimizer disk
check 1 "param-dtype: got 'fp16', expected fp32 or bf16" "${SMALL[@]}" "${OUT[@]}" --param-dtype fp16
check 1 "dp_mode: got 'zero3', expected one of: dp, zero1" "${SMALL[@]}" "${OUT[@]}" --dp-mode zero3
check 1 "lr-decay: got 'linear', expected one of: constant, cosine" "${SMALL[@]}" "${OUT[@]}" --lr-decay linear
check 1 "split-backward: got 'maybe', expected true or false" "${SMALL[@]}" "${OUT[@]}" --split-backward maybe
# Names and arguments.
check 1 "unknown setting 'widht'; expected one of:" "${SMALL[@]}" "${OUT[@]}" --widht 30
check 1 "unexpected argument 'foo' (settings are --name value)" "${SMALL[@]}" "${OUT[@]}" foo
check 1 "--lr: missing value" "${SMALL[@]}" "${OUT[@]}" --lr
# The model and the data.
check 1 "gpt.width: got 30, expected a multiple of gpt.heads (4)" "${SMALL[@]}" "${OUT[@]}" --width 30 --heads 4
check 1 "vocab: got 100, expected >= 256 (the byte corpus's tokens are 0..255)" "${SMALL[@]}" "${OUT[@]}" --vocab 100
check 1 "model: got 'bert', expected gpt or llama" "${SMALL[@]}" "${OUT[@]}" --model bert
check 1 "kv-heads: got 2, expected --model llama too" "${SMALL[@]}" "${OUT[@]}" --kv-heads 2
check 1 "llama.kv_heads: got 3, expected a divisor of heads (4)" "${SMALL[@]}" "${OUT[@]}" --model llama --heads 4 --kv-heads 3
check 1 "llama.width: got 36, expected heads (4) times an even head size" "${SMALL[@]}" "${OUT[@]}" --model llama --width 36 --heads 4
check 1 "memory estimate: about" "${SMALL[@]}" "${OUT[@]}" --width 200000 --depth 64 --heads 1
# Output paths, checked before training on the rank that writes them.
check 1 "metrics: cannot write '/nonexistent/dir/m.jsonl'" "${SMALL[@]}" --metrics /nonexistent/dir/m.jsonl
check 1 "trace: cannot write '/nonexistent/t.rank0.json'" "${SMALL[@]}" --trace /nonexistent/t
check 1 "offload-dir: cannot write '/nonexistent/x'" "${SMALL[@]}" "${OUT[@]}" --recompute --offload-optimizer nvme --offload-dir /nonexistent
check 1 "offload.params(nvme) needs offload.dir" "${SMALL[@]}" "${OUT[@]}" --offload-params nvme
# Layouts and options that contradict each other.
check 1 "ParallelConfig: pp(1)*zero(3)*dp(1)=3 != world_size(1)" "${SMALL[@]}" "${OUT[@]}" --zero 3
check 1 "chunks(2) needs pp > 1" "${SMALL[@]}" "${OUT[@]}" --chunks 2
check 1 "schedule(gpipe) needs pp > 1 (pp = 1 runs the zero3 schedule)" "${SMALL[@]}" "${OUT[@]}" --schedule gpipe
check 1 "unit_size(2) needs pp > 1 and schedule zeropp" "${SMALL[@]}" "${OUT[@]}" --unit-size 2
check 1 "pipeline_recompute(all) needs pp > 1; with pp = 1 use recompute" "${SMALL[@]}" "${OUT[@]}" --pipeline-recompute all
check 1 "offload.activations(cpu) needs recompute=true" "${SMALL[@]}" "${OUT[@]}" --offload-activations cpu
check 1 "max_live_units(1) is below 1 + the most tied-parameter dependencies of a unit (2)" "${SMALL[@]}" "${OUT[@]}" --max-live-units 1
check 1 "decay_steps(0) must be > warmup_steps(0) for lr_decay cosine" "${SMALL[@]}" "${OUT[@]}" --lr-decay cosine
check 1 "eval-batches: got 3, expected a multiple of microbatches (2)" "${SMALL[@]}" "${OUT[@]}" --microbatches 2 --eval-every 1 --eval-batches 3
check 1 "save-every: got 5, expected --save-dir too" "${SMALL[@]}" "${OUT[@]}" --save-every 5
check 1 "resume: got 'auto', expected --save-dir too" "${SMALL[@]}" "${OUT[@]}" --resume auto
check 1 "no checkpoint (neither manifest.json nor latest)" "${SMALL[@]}" "${OUT[@]}" --resume "$CFG"
# Engine options under pp > 1: refused with the reason, never ignored.
check 2 "prefetch(2) needs pp = 1" "${SMALL[@]}" "${OUT[@]}" --pp 2 --prefetch 2
check 2 "max_live_units(3) needs pp = 1" "${SMALL[@]}" "${OUT[@]}" --pp 2 --max-live-units 3
check 2 "reshard_after_forward(false) needs pp = 1" "${SMALL[@]}" "${OUT[@]}" --pp 2 --reshard-after-forward false
check 2 "no_sync(true) needs pp = 1" "${SMALL[@]}" "${OUT[@]}" --pp 2 --no-sync
check 2 "offload_activations(cpu) needs pp = 1" "${SMALL[@]}" "${OUT[@]}" --pp 2 --recompute --offload-activations cpu
check 2 "recompute(true) conflicts with pipeline_recompute(none)" "${SMALL[@]}" "${OUT[@]}" --pp 2 --recompute --pipeline-recompute none
check 2 "zeropp: unit 0 has 1 micro-batches (m(4) split by U(1)) but every unit needs at least pp(2)" "${SMALL[@]}" "${OUT[@]}" --pp 2 --microbatches 4 --unit-size 1
check 2 "layout: the model has 5 scheduling units but pp(2)*chunks(4)=8 virtual stages" "${SMALL[@]}" "${OUT[@]}" --pp 2 --chunks 4
check 2 "unit_size(2) needs schedule zeropp, got 1f1b" "${SMALL[@]}" "${OUT[@]}" --pp 2 --schedule 1f1b --unit-size 2
# JSON files: invalid JSON and duplicate keys refused with the position; values checked as flags.
check 1 "invalid JSON at byte 19: syntax error while parsing object" "${OUT[@]}" --config "$(json missing_comma '{"steps": 5 "width": 32}')"
check 1 "invalid JSON at byte 14: syntax error while parsing value" "${OUT[@]}" --config "$(json trailing '{"steps": 5} xyz')"
check 1 "duplicate key 'steps'" "${OUT[@]}" --config "$(json dup '{"steps": 5, "steps": 6}')"
check 1 "'steps' is object, expected a string, number or boolean" "${OUT[@]}" --config "$(json nested '{"steps": {"a": 1}}')"
check 1 "expected a JSON object" "${OUT[@]}" --config "$(json array '[1, 2]')"
check 1 "lr: got 'inf', expected a finite number" "${OUT[@]}" --config "$(json lr_inf '{"lr": "inf"}')"
check 1 "pp: got '9999999999', expected an integer in [1, 2147483647]" "${OUT[@]}" --config "$(json pp_big '{"pp": 9999999999}')"
check 1 "steps: got '1.5', expected an integer" "${OUT[@]}" --config "$(json steps_frac '{"steps": 1.5}')"
check 1 "unknown setting 'no-such-key'" "${OUT[@]}" --config "$(json unknown '{"no_such_key": 1}')"
check 1 "--config: cannot read '/nonexistent.json'" "${OUT[@]}" --config /nonexistent.json

# ./zpp simulate: zeros, negatives and junk are refused instead of printing inf or nan.
for bad in "--pp 0" "--tflops -5" "--hidden abc" "--inter-gbps 0" "--chunks 1.5"; do
  flag=${bad%% *}; value=${bad#* }
  out="$(timeout 60 "$RUNFILES/tools/simulate" $bad 2>&1)"; rc=$?
  if [[ $rc -ne 0 && "$out" == "simulate: $flag: got '$value', expected"* && "$out" != *inf* && "$out" != *nan* ]]; then
    echo "PASS: simulate $bad -> $out"; PASSES=$((PASSES + 1))
  else
    echo "FAIL: simulate $bad rc=$rc: $out"; FAILS=$((FAILS + 1))
  fi
done

echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 && $PASSES -ge 40 ]]
