"""Writes a hardware description (scheduler/planner/hardware/*.json) as ./zpp calibrate does:
indented, each list of numbers on one line (the measured matmul table has hundreds)."""
import json
import re


def write(path, hw):
    text = json.dumps(hw, indent=2)
    text = re.sub(r"\[\n\s*([-0-9.eE+,\s]+?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    with open(path, "w") as f:
        f.write(text + "\n")
