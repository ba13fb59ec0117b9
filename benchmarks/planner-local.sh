#!/usr/bin/env bash
# ./zpp bench planner-local: the planner's predictions (scheduler/planner, calibrated once on this
# machine by ./zpp calibrate) beside every layout measured by ./zpp bench zeropp-vs-3d (shaped and
# unshaped) and ./zpp bench pipeline (pp=4, pp=2), from their newest committed results; RESULT
# lines: share of layouts within 10% (step time; peak memory where the bench measured it).
#   ./zpp bench planner-local [--recalibrate]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:plan
if [[ "${1:-}" == "--recalibrate" || ! -f scheduler/planner/hardware/cpu-local.json ]]; then tools/calibrate.sh; fi
echo "# command: ./zpp bench planner-local $*  ($(date -u +%Y-%m-%d))"
python3 benchmarks/planner_local.py
