"""The end of ./zpp bench zeropp-vs-3d: RESULT lines and the tokens/s plot from the rows the bench
measured. Usage: zeropp_vs_3d_report.py ROWS.tsv OUT.png TWO_NODES(0|1)"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    rows = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        rows.append(dict(name=f[0], link=f[1], tps=float(f[2]), loss0=f[3], lossn=f[4], rss=float(f[5]),
                         measured=float(f[6]), formula=float(f[7]), paper=f[8], inter=float(f[9]), steps=int(f[11]),
                         mfu=float(f[12])))
    return rows


def verdict(ok):
    return "MET" if ok else "MISSED"


def main():
    rows, png, two_nodes = load(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    link = "shaped" if any(r["link"] == "shaped" for r in rows) else "unshaped"
    mine = [r for r in rows if r["link"] == link]
    zeropp = [r for r in mine if r["name"].startswith("zeropp")]
    three_d = [r for r in mine if r["name"].startswith("3d_")]
    best_z = max(zeropp, key=lambda r: r["tps"])
    best_3 = max(three_d, key=lambda r: r["tps"])
    ratio = best_z["tps"] / best_3["tps"]
    print(f"# on the {link} link: best ZeroPP layout {best_z['name']}, best 3D layout {best_3['name']}"
          + ("" if two_nodes else " (one node: namespaces unavailable)"))
    # As the other benches label it: 4 ranks on fewer cores share them (in the metric's name, so that
    # every RESULT line still ends in MET or MISSED).
    cores = os.cpu_count() or 1
    tag = f"_oversubscribed_{cores}cores" if cores < 4 else ""
    print(f"RESULT zeropp-vs-3d best_zeropp_tokens_per_s_{link}{tag}={best_z['tps']:.0f} tok/s "
          f"reference={best_3['tps']:.0f} ratio={ratio:.3f} target=1.00 {verdict(ratio > 1.0)}")
    print(f"RESULT zeropp-vs-3d best_zeropp_mfu_{link}{tag}={best_z['mfu']:.3f} fraction "
          f"reference={best_3['mfu']:.3f} ratio={best_z['mfu'] / best_3['mfu']:.3f} target=1.00 "
          f"{verdict(best_z['mfu'] > best_3['mfu'])}")
    mratio = best_z["rss"] / max(best_3["rss"], 1.0)
    print(f"RESULT zeropp-vs-3d best_zeropp_peak_rss_net_mb={best_z['rss']:.0f} MB reference={best_3['rss']:.0f} "
          f"ratio={mratio:.3f} target=1.25 {verdict(mratio <= 1.25)}")
    for design, group in (("zeropp", [r for r in mine if not r["name"].startswith("3d_") and r["formula"] > 0]),
                          ("3d", three_d)):
        worst = max(group, key=lambda r: abs(r["measured"] / r["formula"] - 1))
        q = worst["measured"] / worst["formula"]
        print(f"RESULT zeropp-vs-3d {design}_bytes_worst_{worst['name']}={worst['measured']:.0f} B "
              f"reference={worst['formula']:.0f} ratio={q:.4f} target=1+-0.02 {verdict(abs(q - 1) <= 0.02)}")
    names = list(dict.fromkeys(r["name"] for r in rows))
    links = list(dict.fromkeys(r["link"] for r in rows))
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.8 / len(links)
    for i, lk in enumerate(links):
        vals = [next((r["tps"] for r in rows if r["name"] == n and r["link"] == lk), 0) for n in names]
        ax.bar([k + i * width for k in range(len(names))], vals, width, label=f"inter-node link {lk}")
    ax.set_xticks([k + width * (len(links) - 1) / 2 for k in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("tokens/s (4 ranks on 2 cores)")
    ax.set_title("ZeroPP vs 3D parallelism, same GPT, batch and data" + (" (2 nodes x 2 ranks)" if two_nodes else ""))
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"# plot: {png}")


if __name__ == "__main__":
    main()
