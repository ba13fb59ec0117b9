#!/usr/bin/env python3
"""pipeline_level_history.py: each committed planner-local run's own 2-rank pipeline job against its rows.

A diagnostic, never a RESULT. The calibration's intra_node_p2p job (one 2-rank pipeline, a core per
rank, tools/p2p_fit.py) prints its measured steps and the planner's prediction of them; only their
growth with the chunks is used. This prints, per run, that job's level (measured / predicted, one
chunk and four) beside the run's mean pred/meas of the pipeline-bench rows (pp2, pp4), of the
zeropp-vs-3d rows without tensor parallelism and of the 3D rows, as that run's table printed them
(the planner of its day), and the correlation of the level with each.
  python3 tools/pipeline_level_history.py [RESULTS_DIR]
"""
import glob
import os
import re
import statistics as st
import sys

P2P = re.compile(r'intra_node_p2p from.*?step ([0-9./]+) and ([0-9./]+) s measured.*?'
                 r'\(([0-9.]+) and ([0-9.]+) s predicted')


def row_mean(text, pattern):
    v = [float(x) for x in re.findall(r'^' + pattern + r'\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)', text, re.M)]
    return st.mean(v) if v else float('nan')


def corr(a, b):
    """Pearson's r, or nan where it has no value (fewer than 3 pairs, or one side constant)."""
    pairs = [(x, y) for x, y in zip(a, b) if x == x and y == y]  # nan: the run printed no such row
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    try:
        return st.correlation(a, b) if len(a) >= 3 else float('nan')
    except st.StatisticsError:
        return float('nan')


def main(argv):
    d = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'benchmarks', 'results')
    rows = []
    for f in glob.glob(os.path.join(d, 'planner-local-*-r*.txt')):
        m = re.search(r'-r(\d+)\.txt$', f)
        with open(f) as fh:
            t = fh.read() if m else ''
        q = P2P.search(t)
        if not q:
            continue
        l1 = st.mean(map(float, q.group(1).split('/'))) / float(q.group(3))
        l4 = st.mean(map(float, q.group(2).split('/'))) / float(q.group(4))
        rows.append((int(m.group(1)), l1, l4, row_mean(t, r'pipeline pp2 \S+'), row_mean(t, r'pipeline pp4 \S+'),
                     row_mean(t, r'(?:zero3|fsdp|zeropp|pp2_dp2)\S* \((?:un)?shaped\)'),
                     row_mean(t, r'3d_\S+ \((?:un)?shaped\)')))
    if len(rows) < 3:
        sys.exit(f'pipeline_level_history: {d}: found {len(rows)} runs with an intra_node_p2p line, expected 3 or more')
    rows.sort()
    print('run   level1 level4 pp2    pp4    zero   3d')
    for r in rows:
        print('r%-4d %.3f  %.3f  %.3f  %.3f  %.3f  %.3f' % r)
    for since in (0, 127):  # all runs, and those since r127, the split the history's README counts
        sel = [r for r in rows if r[0] >= since]
        if len(sel) < 3:
            continue
        print('since r%d (%d runs): corr(level1, mean pred/meas) ' % (sel[0][0], len(sel)) +
              ', '.join('%s %.2f' % (k, corr([r[1] for r in sel], [r[i] for r in sel]))
                        for k, i in (('pp2', 3), ('pp4', 4), ('zero', 5), ('3d', 6))))


if __name__ == '__main__':
    main(sys.argv)
