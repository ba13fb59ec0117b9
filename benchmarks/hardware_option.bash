# benchmarks/hardware_option.bash: sourced (from the checkout's root) by the benches whose only
# option is --hardware FILE (tp-wait-alone, deferred-w).
#   hardware_option NAME "$@"   sets HW (default scheduler/planner/hardware/cpu-local.json), or
#                               prints one line naming NAME and what was wrong and exits 2
hardware_option() {
  local name=$1
  shift
  HW=scheduler/planner/hardware/cpu-local.json
  while (($#)); do
    case "$1" in
      --hardware) HW="${2:-}"; shift 2 || shift ;;
      *) echo "$name: unknown option '$1' (expected --hardware FILE)" >&2; exit 2 ;;
    esac
  done
  [[ -f "$HW" ]] || { echo "$name: --hardware: no file '$HW'" >&2; exit 2; }
}
