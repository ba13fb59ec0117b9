"""benchmarks/planner_local.py's rounds_spread: each layout's step time per round of zeropp-vs-3d --rounds
(32 x 128 tokens over the round's tok/s), the spread, the prediction over each round, the host's steal share
where the lines carry it, the counts, and the rounds' pooled noise (noise_floor),
against values worked out by hand; layouts measured once, or not predicted, are left out."""
import contextlib
import io
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import planner_local  # noqa: E402

TOKENS = 32 * 128


def spread_of(lines, predicted):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vs3d.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            planner_local.rounds_spread(path, predicted)
        return out.getvalue()


def main():
    # a: 1.00 s then 1.05 s (spread 1.05), predicted 1.00: within 10% of both rounds.
    # b: 1.00 s then 1.25 s (spread 1.25), predicted 1.20: 1.2x the first, 0.96x the second.
    # c: 2.00 s then 2.00 s, predicted 1.50 (0.75x both). d: one round only. e: not predicted.
    lines = ["# round 1 of 2, run 1 of 4: a (unshaped) %.4f tok/s, steal 12.5%%" % (TOKENS / 1.00),
             "# round 1 of 2, run 2 of 4: b (shaped) %.4f tok/s" % (TOKENS / 1.00),
             "# round 1 of 2, run 3 of 4: c (shaped) %.4f tok/s" % (TOKENS / 2.00),
             "# round 1 of 2, run 4 of 4: d (shaped) %.4f tok/s" % (TOKENS / 3.00),
             "#| # round 1 of 2, run 4 of 4: e (shaped) %.4f tok/s" % (TOKENS / 3.00),
             "a                    unshaped      4096",
             "# round 2 of 2, run 1 of 4: c (shaped) %.4f tok/s" % (TOKENS / 2.00),
             "# round 2 of 2, run 2 of 4: b (shaped) %.4f tok/s" % (TOKENS / 1.25),
             "# round 2 of 2, run 3 of 4: a (unshaped) %.4f tok/s, steal 0.0%%" % (TOKENS / 1.05),
             "# round 2 of 2, run 4 of 4: e (shaped) %.4f tok/s" % (TOKENS / 3.00),
             "# round 1 of 2, run 5 of 5: f (shaped) %.4f tok/s, steal 0.0%%" % (TOKENS / 1.00),
             "# round 2 of 2, run 1 of 5: f (shaped) %.4f tok/s, steal 30.0%%" % (TOKENS / 2.00)]
    # f: 1.00 s undisturbed, 2.00 s with 30% of the CPU stolen, predicted 1.05: 1.05x its undisturbed round.
    out = spread_of(lines, {"a (unshaped)": 1.0, "b (shaped)": 1.2, "c (shaped)": 1.5, "d (shaped)": 3.0,
                            "f (shaped)": 1.05})
    rows = {l.split(" (")[0]: l for l in out.splitlines() if not l.startswith("#")}
    assert sorted(rows) == ["a", "b", "c", "f"], out
    # a's runs carry the host's steal share (zeropp-vs-3d from r104 on), b's do not.
    assert "1.0000  1.0500  spread 1.050  pred/meas 1.000 0.952  steal% 12.5  0.0" in rows["a"], out
    assert rows["b"].endswith("1.0000  1.2500  spread 1.250  pred/meas 1.200 0.960"), out
    assert "2.0000  2.0000  spread 1.000  pred/meas 0.750 0.750" in rows["c"], out
    assert "1.0000  2.0000  spread 2.000  pred/meas 1.050 0.525  steal%  0.0 30.0" in rows["f"], out
    assert ("2 of 4 layouts' rounds within 10% of each other; the prediction within 10% of every round's time "
            "for 1 of 4, of at least one round's for 3 of 4") in out, out
    # a's undisturbed round is its second (1.05 s: 0.952x), f's its first (1.00 s: 1.05x; both rounds' mean, 0.70x).
    assert "2 of 4 layouts had a round with under 1% of the CPU stolen; the prediction within 10% of those " \
           "rounds' mean time for 2 of 2" in out, out
    # The rounds' own spread, pooled over a, b, c and f (two rounds each): ln(time) deviations of
    # +-ln(ratio)/2 for each, over 4 degrees of freedom.
    s = math.sqrt(sum(2 * (math.log(r) / 2) ** 2 for r in (1.05, 1.25, 1.0, 2.0)) / 4)
    sd = s / math.sqrt(2)
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))
    share = phi(-math.log(0.9) / sd) - phi(-math.log(1.1) / sd)
    assert (f"the rounds' own spread, sd {s:.3f} in ln(step time) around each layout's mean; the reported times' "
            f"noise {sd:.3f}: a planner without error would put {share:.1%} of these 4 rows within 10%, and all 4 in "
            f"{share ** 4:.1%} of runs") in out, out
    # One round (a bench run without --rounds): nothing printed.
    assert spread_of(lines[:6], {"a (unshaped)": 1.0}) == "", "one round printed a table"
    print("planner_local_rounds_test: ok")


main()
