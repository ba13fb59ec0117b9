#!/usr/bin/env bash
# ./zpp bench planner-local: the planner's predictions (scheduler/planner, calibrated once on this
# machine by ./zpp calibrate) beside every layout measured by ./zpp bench zeropp-vs-3d (shaped and
# unshaped) and ./zpp bench pipeline (pp=4, pp=2); RESULT lines: share of layouts within 10% (step
# time; peak memory where the bench measured it).
#   ./zpp bench planner-local            the newest committed --fresh output
#                                        (benchmarks/results/planner-local-DATE-rN.txt), whose
#                                        calibration is the committed cpu-local.json, predicted again
#                                        by the current planner (as --from that file)
#   ./zpp bench planner-local --fresh    calibrate, then run both benches, in this invocation (the
#                                        calibration and the measurements see the same machine;
#                                        this one drifts by 5-10% in matmul and loopback speed
#                                        from day to day); zeropp-vs-3d runs every layout three
#                                        times (--rounds 3, every other round backwards) and
#                                        reports the median, which one disturbed round cannot
#                                        move (r102-r112 ran two: a layout's rounds differed by
#                                        up to 1.29x with no CPU stolen, r112); r113 and r114
#                                        (three rounds) took 40-42 minutes on a 2-core box, r112
#                                        (two) 36
#   ./zpp bench planner-local --from F [--hardware H]
#                                        the measurements kept in an earlier --fresh output F,
#                                        predicted again by the current planner (its hardware
#                                        description as committed, or H: e.g. a copy with one
#                                        calibrated field changed, to see what that field moves)
#   ./zpp bench planner-local --history  every committed --fresh output whose calibration was
#                                        committed with it and measured the links loaded and idle
#                                        (r29 on), each predicted again by the current planner
#                                        with that calibration (from git; its compute fit redone
#                                        by the current cost model from the times it measured, its
#                                        links by tools/link_fit.py from the sweeps it printed), and
#                                        the rows' bias and spread per layout over the runs (needs a
#                                        git checkout)
#   ./zpp bench planner-local --history --set FIELD=VALUE[,FIELD=VALUE...]
#                                        the same, with numeric fields of every run's calibration
#                                        (dots into objects: matmul.cold_weight_gbps) set to VALUE
#                                        before its compute fit is redone
#                                        (a what-if: what a term no calibration measures would move,
#                                        e.g. action_overhead_us; never a RESULT a target is met by)
#   ./zpp bench planner-local --cross    every committed --fresh output whose calibration measured
#                                        the transport's CPU per link (r71 on), predicted with each
#                                        OTHER such run's calibration: one calibration of the machine
#                                        predicting measurements taken hours apart, labelled
#                                        MEASURED@CALIBRATION (needs a git checkout)
#   ./zpp bench planner-local --cross --since rN
#                                        the same over the runs from rN on (r127 on: the
#                                        calibrations that measure the pipeline message's CPU)
#   ./zpp bench planner-local --pooled N every run --history predicts, with the median of its own
#                                        calibration and the N committed before it, field by field
#                                        (benchmarks/calibration_median.py): whether a calibration
#                                        pooled over several sittings predicts better than the one
#                                        taken beside the benches (needs a git checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:plan
HW=scheduler/planner/hardware/cpu-local.json
echo "# command: ${ZEROPP_BIND_CORES:+ZEROPP_BIND_CORES=$ZEROPP_BIND_CORES }./zpp bench planner-local $*  ($(date -u +%Y-%m-%d))"
if (($# == 0)); then
  # Measurements and calibration from one invocation: the benches' own committed tables may come from
  # another machine than cpu-local.json.
  NEWEST="$(ls benchmarks/results/planner-local-*-r[0-9]*.txt 2>/dev/null | grep -E -- '-r[0-9]+\.txt$' | sort -V |
    tail -1)" || NEWEST=""
  [[ -n "$NEWEST" ]] ||
    { echo "planner-local: no committed --fresh output in benchmarks/results/ (run ./zpp bench planner-local --fresh)" >&2; exit 2; }
  set -- --from "$NEWEST"
fi
if [[ "$1" == --from && "${3:-}" == --hardware ]]; then
  [[ $# == 4 && -f "$4" ]] ||
    { echo "planner-local: --from F --hardware: got '${4:-}', expected one hardware description file" >&2; exit 2; }
  HW="$4"
  set -- "$1" "$2"
fi
POOL=0
SET_FIELD="" SET_VALUE=""
if [[ "$1" == --history && "${2:-}" == --set ]]; then
  SETTING='[a-z_]+([.][a-z_]+)*=[0-9]+([.][0-9]+)?'
  [[ $# == 3 && "$3" =~ ^$SETTING(,$SETTING)*$ ]] ||
    { echo "planner-local: --history --set: got '${3:-}', expected FIELD=VALUE[,FIELD=VALUE...] (a field, dots" \
        "into objects, and a number)" >&2; exit 2; }
  SET_VALUE="$3" SET_FIELD="$(sed -E 's/=[0-9.]+//g; s/[.,]/_/g' <<<"$3")"
  set -- --history
fi
SINCE=0
if [[ "$1" == --cross && "${2:-}" == --since ]]; then
  [[ $# == 3 && "$3" =~ ^r[0-9]+$ ]] ||
    { echo "planner-local: --cross --since: got '${3:-}', expected the first run to include, such as r127" >&2; exit 2; }
  SINCE="${3#r}"
  set -- --cross
fi
if [[ "$1" == --pooled ]]; then
  [[ $# == 2 && "$2" =~ ^[1-9][0-9]?$ ]] ||
    { echo "planner-local: --pooled: got '${2:-}', expected how many earlier calibrations to pool (1-99)" >&2; exit 2; }
  POOL="$2"
  set -- --history
fi
case "$1:$#" in
  --fresh:1 | --from:2 | --history:1 | --cross:1) ;;
  --fresh:* | --history:* | --cross:*) echo "planner-local: $1 takes no value (got: $*)" >&2; exit 2 ;;
  --from:*) echo "planner-local: --from takes one file, then optionally --hardware FILE (got: $*)" >&2; exit 2 ;;
esac
case "$1" in
  --fresh)
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-planner-local.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    # Sub-bench output is kept, prefixed "#| ": the measurements behind the table below.
    tools/calibrate.sh "$HW" 2>&1 | sed 's/^/#| /'
    # The box's speed now and after each bench: the calibration's third shape run again (one run per
    # core at once). A diagnostic beside the table; the predictions never use it.
    UNITS=$(python3 -c "import json; print(json.load(open('$HW'))['shared_compute_units'])")
    speed() { tools/reference_runs.sh "$UNITS" "$WORK/speed_$1" 64 4 --speed "$1" | tee -a "$WORK/speed.txt" | sed 's/^/#| /'; }
    speed calibration
    benchmarks/zeropp-vs-3d.sh --rounds 3 --no-crossover --plot "$WORK/vs3d.png" >"$WORK/vs3d.txt" 2>&1 ||
      { sed 's/^/#| /' "$WORK/vs3d.txt"; exit 1; }
    sed 's/^/#| /' "$WORK/vs3d.txt"
    speed after_vs3d
    ZPP_PIPELINE_OUT="$WORK/pipeline" ZPP_BENCH_STEPS=20 benchmarks/pipeline.sh >"$WORK/pipeline.txt" 2>&1 ||
      { sed 's/^/#| /' "$WORK/pipeline.txt"; exit 1; }
    sed 's/^/#| /' "$WORK/pipeline.txt"
    speed after_pipeline
    python3 benchmarks/planner_local.py --hardware "$HW" --vs3d "$WORK/vs3d.txt" --pipeline "$WORK/pipeline.txt" \
      --speed "$WORK/speed.txt"
    ;;
  --from)
    [[ -f "${2:-}" ]] ||
      { echo "planner-local: --from: got '${2:-}', expected an earlier --fresh output file" >&2; exit 2; }
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-planner-local.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    # The sub-benches' output, as --fresh kept it ("#| " lines); both parsers skip the other's rows.
    sed -n 's/^#| //p' "$2" >"$WORK/measured.txt"
    grep -q '^layout  *link' "$WORK/measured.txt" ||
      { echo "planner-local: --from: $2 holds no zeropp-vs-3d table (not a --fresh output?)" >&2; exit 2; }
    echo "# measurements from $2; hardware description $HW"
    python3 benchmarks/planner_local.py --hardware "$HW" --vs3d "$WORK/measured.txt" --pipeline "$WORK/measured.txt" \
      --speed "$WORK/measured.txt"
    ;;
  --history | --cross)
    git rev-parse --git-dir >/dev/null 2>&1 ||
      { echo "planner-local: $1: needs a git checkout (each run's calibration is read from its commit)" >&2; exit 2; }
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-planner-local.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    # --history: runs whose calibration measured the links loaded and idle (r29 on), each with its
    # own calibration; --cross: those whose calibration also measured the transport's CPU between
    # nodes (r71 on), each with every other run's.
    if [[ "$1" == --history ]]; then KEY='"inter_node_idle"' RESULT_NAME=history
      ((POOL == 0)) || RESULT_NAME="pooled_$POOL"
      [[ -z "$SET_FIELD" ]] || RESULT_NAME="whatif_$SET_FIELD"
    else KEY='"comm_cpu_inter_node_gbps"' RESULT_NAME=cross_calibration
      ((SINCE == 0)) || RESULT_NAME="cross_calibration_since_r$SINCE"; fi
    NAMES=()
    for f in $(ls benchmarks/results/planner-local-*-r[0-9]*.txt | grep -E -- '-r[0-9]+\.txt$' | sort -V); do
      run="${f##*-}" run="${run%.txt}"
      ((${run#r} >= SINCE)) || continue
      added="$(git log --diff-filter=A --format=%h -1 -- "$f")"
      # Its calibration: the cpu-local.json committed with it, if that commit wrote one.
      git show --name-only --format= "$added" | grep -qx "$HW" || continue
      git show "$added:$HW" >"$WORK/$run.json"
      grep -q "$KEY" "$WORK/$run.json" || continue
      if [[ -n "$SET_FIELD" ]]; then  # before the refit: the compute fit must see the term it shares the times with
        python3 -c "import json, sys; sys.path.insert(0, 'tools'); import hardware_json
h = json.load(open(sys.argv[1]))
for setting in sys.argv[2].split(','):
    path, value = setting.split('=')
    *outer, last = path.split('.')
    d = h
    for k in outer:
        d = d.setdefault(k, {})
        if not isinstance(d, dict):
            sys.exit('planner-local: --history --set: %s: %s is a number in the description, not an object' % (setting, k))
    d[last] = float(value)
hardware_json.write(sys.argv[1], h)" "$WORK/$run.json" "$SET_VALUE"
      fi
      # Its compute fit redone by the current cost model from the times its calibration measured,
      # as ./zpp calibrate would fit them now (tools/compute_fit.py): what the cost model charges
      # apart, the fixed cost per layer must not take in a second time.
      python3 tools/compute_fit.py refit "$WORK/$run.json" | sed "s|$WORK/||; s|^|# |" >>"$WORK/refits.txt"
      # With tp_peer_skew (a what-if: --set tp_peer_skew=1), the TP pairs' link fitted again without
      # the skew the planner then charges apart (tools/tp_pairs_fit.py), after the compute fit it uses.
      if python3 -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get('tp_peer_skew', 0) > 0 else 1)" \
           "$WORK/$run.json"; then
        python3 tools/tp_pairs_fit.py refit "$WORK/$run.json" | sed "s|^|# |" >>"$WORK/refits.txt"
      fi
      sed -n 's/^#| //p' "$f" >"$WORK/$run.txt"
      # Its two-node links fitted again from the sweeps its calibration printed, as ./zpp calibrate
      # would fit them now (tools/link_fit.py).
      python3 tools/link_fit.py refit "$WORK/$run.json" "$WORK/$run.txt" | sed "s|^|# |" >>"$WORK/refits.txt"
      NAMES+=("$run")
    done
    ((${#NAMES[@]} > 0)) || { echo "planner-local: $1: no committed run with its calibration" >&2; exit 2; }
    [[ "$1" == --history || ${#NAMES[@]} -gt 1 ]] ||
      { echo "planner-local: --cross: needs two runs or more (found ${NAMES[*]:-none})" >&2; exit 2; }
    if ((POOL > 0)); then
      # Each run's calibration replaced by the median of it and the POOL committed before it.
      for i in "${!NAMES[@]}"; do
        earlier=()
        for ((j = i > POOL ? i - POOL : 0; j < i; j++)); do earlier+=("$WORK/${NAMES[$j]}.json"); done
        python3 benchmarks/calibration_median.py "$WORK/${NAMES[$i]}.pooled.json" "$WORK/${NAMES[$i]}.json" \
          ${earlier[@]+"${earlier[@]}"}
      done
      for run in "${NAMES[@]}"; do mv "$WORK/$run.pooled.json" "$WORK/$run.json"; done
    fi
    RUNS=()
    for meas in "${NAMES[@]}"; do
      for cal in "${NAMES[@]}"; do
        if [[ "$1" == --history ]]; then [[ "$cal" == "$meas" ]] || continue; label="$meas"
        else [[ "$cal" != "$meas" ]] || continue; label="$meas@$cal"; fi
        python3 benchmarks/planner_local.py --hardware "$WORK/$cal.json" --vs3d "$WORK/$meas.txt" \
          --pipeline "$WORK/$meas.txt" --rows-tsv "$WORK/$label.tsv" >"$WORK/$label.out"
        RUNS+=("$label=$WORK/$label.tsv")
      done
    done
    cat "$WORK/refits.txt"
    if ((POOL > 0)); then
      echo "# ${#RUNS[@]} runs, each predicted by the current planner with the median of its own calibration and the" \
        "$POOL committed before it (field by field)"
    elif [[ "$1" == --history ]]; then
      echo "# ${#RUNS[@]} runs, each predicted by the current planner with the calibration committed beside it" \
        "${SET_FIELD:+(a what-if: $SET_VALUE in every one)}"
    else
      echo "# ${#NAMES[@]} runs (${NAMES[*]}), each predicted by the current planner with every other run's calibration:" \
        "${#RUNS[@]} pairs, labelled MEASURED@CALIBRATION"
    fi
    python3 benchmarks/planner_local_history.py --name "$RESULT_NAME" "${RUNS[@]}"
    ;;
  *) echo "planner-local: unknown option '$1' (expected nothing, --fresh, --from FILE, --history, --pooled N or --cross [--since rN])" >&2; exit 2 ;;
esac
