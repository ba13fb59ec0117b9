#!/usr/bin/env python3
"""zpp timeline: draws the per-rank Gantt picture of Chrome trace JSON files (the executor's
measured traces or the simulator's predictions) as a PNG, with the standard library only.

  ./zpp timeline trace.rank0.json trace.rank1.json ... -o timeline.png

One lane per rank (the trace's tid). Compute on the upper band: forward blue, recomputed forward
(at the start of a backward) light blue, backward (B and Bi) green, weight-gradient W teal, optimizer purple; communication on the lower band: gather/release
orange, reduce-scatter red, point-to-point gray. White is idle.
"""
import argparse
import json
import struct
import sys
import zlib

COLORS = {
    "F": (52, 101, 164), "R": (114, 159, 207), "B": (78, 154, 6), "Bi": (78, 154, 6), "W": (6, 152, 154), "OPT": (117, 80, 123),
    "G": (245, 121, 0), "X": (252, 175, 62), "RS": (204, 0, 0),
    "SA": (136, 138, 133), "RA": (186, 189, 182), "SG": (136, 138, 133), "RG": (186, 189, 182),
}
LOWER = {"G", "X", "RS", "SA", "RA", "SG", "RG"}
# 3x5 glyphs for the labels.
FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", "R": "110101110101101", "A": "010101111101101",
    "N": "101111111111101", "K": "101110100110101", "F": "111100110100100", "B": "110101110101110",
    "W": "101101111111101", "G": "111100101101111", "S": "111100111001111", "P": "111101111100100",
    "O": "111101101101111", "T": "111010010010010", "I": "111010010010111", "E": "111100110100111",
    "D": "110101101101110", "L": "100100100100111", "M": "101111111101101", "X": "101101010101101",
    " ": "000000000000000", "=": "000111000111000", ".": "000000000000010", "s": "000011110011110",
    "m": "000110111101101", "Z": "111001010100111", "U": "101101101101111", "V": "101101101101010",
    "C": "111100100100111", "H": "101101111101101", "Y": "101101010010010", "Q": "111101101111001",
    "J": "001001001101111", "-": "000000111000000", "/": "001001010100100", "(": "010100100100010",
    ")": "010001001001010", ",": "000000000010100", ":": "000010000010000", "%": "101001010100101",
}


def prefix(name):
    for p in ("Bi", "OPT", "SA", "RA", "SG", "RG", "RS", "F", "R", "B", "W", "G", "X"):
        if name.startswith(p):
            return p
    return None


def text(img, w, x, y, s, color=(0, 0, 0), scale=2):
    for ch in s:
        g = FONT.get(ch, FONT[" "])
        for i, bit in enumerate(g):
            if bit == "1":
                for dy in range(scale):
                    for dx in range(scale):
                        px, py = x + (i % 3) * scale + dx, y + (i // 3) * scale + dy
                        if 0 <= px < w and 0 <= py < len(img):
                            img[py][px] = color
        x += 4 * scale


def write_png(path, img):
    h, w = len(img), len(img[0])
    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in img)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    events = []
    for path in a.traces:
        try:
            with open(path) as f:
                events += json.load(f)["traceEvents"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"zpp timeline: cannot read trace '{path}': {e}")
    if not events:
        sys.exit("zpp timeline: the traces hold no events")
    ranks = sorted({e["tid"] for e in events})
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    left, top, lane, band = 70, 40, 44, 26
    w = a.width
    h = top + lane * len(ranks) + 40
    img = [[(255, 255, 255)] * w for _ in range(h)]
    scale = (w - left - 10) / max(t1 - t0, 1e-9)
    for i, r in enumerate(ranks):
        y = top + i * lane
        text(img, w, 6, y + 8, f"RANK {r}")
        for x in range(left, w - 10):
            img[y + lane - 4][x] = (230, 230, 230)
    for e in events:
        p = prefix(e["name"])
        if p is None:
            continue
        i = ranks.index(e["tid"])
        y0 = top + i * lane + (band if p in LOWER else 0)
        y1 = y0 + (12 if p in LOWER else band - 2)
        x0 = left + int((e["ts"] - t0) * scale)
        x1 = max(x0 + 1, left + int((e["ts"] + e["dur"] - t0) * scale))
        for y in range(y0, min(y1, h)):
            row = img[y]
            for x in range(x0, min(x1, w - 10)):
                row[x] = COLORS[p]
            if x1 - x0 > 3:
                row[x0] = (255, 255, 255)
    ms = (t1 - t0) / 1000.0
    text(img, w, left, 10, (a.title.upper() + "  " if a.title else "") + f"{ms:.1f} ms")
    x = left
    for label, key in (("F", "F"), ("R", "R"), ("B", "B"), ("W", "W"), ("G", "G"), ("RS", "RS"), ("P2P", "SA"), ("OPT", "OPT")):
        for yy in range(h - 24, h - 12):
            for xx in range(x, x + 16):
                img[yy][xx] = COLORS[key]
        text(img, w, x + 20, h - 23, label)
        x += 90
    write_png(a.output, img)
    print(f"zpp timeline: {len(events)} events, {len(ranks)} ranks, {ms:.1f} ms -> {a.output}")


if __name__ == "__main__":
    main()
