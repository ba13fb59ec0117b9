"""tools/tp_cpu_fit.py: comm_cpu_messages_per_tp_collective from a coupled tp2 x dp2 job's rest of the
step at two densities of collectives. The fit recovers a known k from synthetic runs built on the
planner's own rests whatever level the box's speed adds to both densities, and clamps a negative one to
0; the planner's rest is linear in the field at the fit's shapes (the form the fit assumes); the
command writes the field and a note into the description; bad input gets one line naming it and exit 1,
and the description is left as it was."""
import json
import os
import subprocess
import sys

RUNFILES = os.environ["ZEROPP_RUNFILES"]
sys.path.insert(0, os.path.join(RUNFILES, "tools"))
import tp_cpu_fit  # noqa: E402

PLAN = os.path.join(RUNFILES, "tools", "plan")
SCRIPT = os.path.join(RUNFILES, "tools", "tp_cpu_fit.py")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
LINK = ["--inter-gbps", "0.95", "--inter-latency-us", "2500", "--inter-idle-gbps", "1.2", "--inter-idle-latency-us", "280"]


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def main():
    hw_src = os.path.join(RUNFILES, "scheduler/planner/hardware/cpu-local.json")
    hw = json.load(open(hw_src))
    hw.pop(tp_cpu_fit.FIELD, None)
    # The fit on numbers: the measured rest = the planner's at k = 0 + k x its growth per unit + a level.
    p0 = {2: 0.35, 8: 0.33}
    p1 = {2: 0.38, 8: 0.3375}  # per unit k: 0.03 at 168 collectives, 0.0075 at 42
    for k_true in (0.0, 1.5, 4.0):
        for level in (0.0, 0.04):
            meas = {mb: p0[mb] + k_true * (p1[mb] - p0[mb]) + level for mb in (2, 8)}
            k = tp_cpu_fit.fit_k(meas, p0, p1)
            check(abs(k - k_true) < 1e-9, f"fit_k recovers k={k_true} at level {level} (got {k})")
    check(tp_cpu_fit.fit_k({2: 0.30, 8: 0.33}, p0, p1) == 0.0, "a negative k is clamped to 0")
    # The planner's rest is linear in the field (each collective k messages of its rank's CPU).
    r = {k: tp_cpu_fit.predicted_rest(PLAN, hw, k, LINK) for k in (0, 1, 3)}
    for mb in (2, 8):
        check(abs((r[3][mb] - r[0][mb]) - 3 * (r[1][mb] - r[0][mb])) < 2e-4,
              f"rest linear in k at micro-batch {mb}: {r[0][mb]:.5f} {r[1][mb]:.5f} {r[3][mb]:.5f}")
    check(r[1][2] - r[1][8] > r[0][2] - r[0][8], "the denser job's rest grows more per unit k")
    # The command: synthetic runs at k = 2.5 over the description's own link, written into a copy.
    path = os.path.join(TMP, "tp_cpu_fit_hw.json")
    json.dump(hw, open(path, "w"))
    link = tp_cpu_fit.planner_local.unshaped_link_flags(hw)
    q0, q1 = tp_cpu_fit.predicted_rest(PLAN, hw, 0, link), tp_cpu_fit.predicted_rest(PLAN, hw, 1, link)
    runs = os.path.join(TMP, "tp_cpu_fit_runs.txt")
    with open(runs, "w") as f:
        for mb in (2, 8):
            rest = q0[mb] + 2.5 * (q1[mb] - q0[mb]) + 0.02
            for wait in (0.1, 0.2):  # two runs each; the fit takes the means
                f.write(f"{mb} {rest + wait:.6f} {wait}\n")
    out = subprocess.run([sys.executable, SCRIPT, "fit", path, runs, "--plan", PLAN], capture_output=True, text=True)
    check(out.returncode == 0, "fit runs: " + out.stderr)
    written = json.load(open(path))
    check(abs(written[tp_cpu_fit.FIELD] - 2.5) < 0.01, f"fit writes k = 2.5 (got {written[tp_cpu_fit.FIELD]})")
    check("tools/calibrate_tp_cpu.sh" in written["source"], "fit notes its measurement in the source")
    check(out.stdout.startswith("calibrate: comm_cpu_messages_per_tp_collective 2.50"), "one line: " + out.stdout)
    # Bad input: one line naming it, exit 1, the description unchanged.
    before = open(path).read()
    bad = os.path.join(TMP, "tp_cpu_fit_bad.txt")
    for text, needle in (("2 0.5 0.1\n", "no run at micro-batch 8"), ("2 0.5 0.1\n8 x 0.1\n", "expected 'MICRO_BATCH"),
                         ("4 0.5 0.1\n8 0.4 0.1\n", "expected micro-batch 2 or 8"),
                         ("2 0.5 0.6\n8 0.4 0.1\n", "0 <= TP wait < step")):
        open(bad, "w").write(text)
        out = subprocess.run([sys.executable, SCRIPT, "fit", path, bad, "--plan", PLAN], capture_output=True, text=True)
        check(out.returncode == 1 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1,
              f"bad runs refused with one line ({needle}): rc={out.returncode} {out.stderr!r}")
        check(open(path).read() == before, "the description unchanged after bad input")
    out = subprocess.run([sys.executable, SCRIPT, "fit", path], capture_output=True, text=True)
    check(out.returncode == 1 and "usage" in out.stderr, "missing argument: usage line")
    print("tp_cpu_fit_test: ok")


if __name__ == "__main__":
    main()
