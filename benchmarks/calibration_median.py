#!/usr/bin/env python3
"""calibration_median.py: one hardware description whose every measured number is the median of
several calibrations of the same machine (benchmarks/planner-local.sh --pooled).

  calibration_median.py OUT OWN [OTHER ...]

OUT takes OWN's fields, each number replaced by the median of that number over OWN and every OTHER
that has it (a list element-wise, over those whose list is as long); text, flags and OWN's set of
fields stay OWN's, so the planner charges what OWN's calibration charges, with pooled figures.
"""
import json
import statistics
import sys


def median_of(own, others):
    if isinstance(own, bool) or not isinstance(own, (int, float, list, dict)):
        return own
    if isinstance(own, (int, float)):
        values = [x for x in others if isinstance(x, (int, float)) and not isinstance(x, bool)]
        return statistics.median([own] + values)
    if isinstance(own, list):
        alike = [x for x in others if isinstance(x, list) and len(x) == len(own)]
        return [median_of(v, [x[i] for x in alike]) for i, v in enumerate(own)]
    return {k: median_of(v, [x[k] for x in others if isinstance(x, dict) and k in x]) for k, v in own.items()}


def main(argv):
    if len(argv) < 2:
        sys.exit("calibration_median: expected OUT OWN [OTHER ...] (hardware description files)")
    own, *others = (json.load(open(path)) for path in argv[1:])
    with open(argv[0], "w") as out:
        json.dump(median_of(own, others), out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
