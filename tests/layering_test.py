#!/usr/bin/env python3
"""Dependencies point down only. Reads every #include "..." line of the repository's C++ files
and every Bazel label in its BUILD files, assigns each file and target to a layer, and fails on
any edge to a layer its own may not use:

    tools/  benchmarks/  examples/        (tools and benchmarks never use each other; examples
                                            use only the public header and zeropp/cli)
    public      zeropp/zeropp.h, zeropp/trainer.cc, target //zeropp:zeropp
    runtime     scheduler/runtime/
    ir          scheduler/ (pure schedule IR: uses nothing of the runtime or the core)
    core        zeropp/ (and zeropp/cli/, the command-line helpers)
    offload     offload/
    kernels     kernels/
    models      models/ (the bundled GPT: uses only LibTorch)
tests/ and third_party/ may use anything. It first proves the checker catches a planted
violation, so it cannot pass vacuously."""
import os
import re
import sys

ALLOWED = {
    "kernels": {"kernels"},
    "offload": {"offload", "kernels"},
    "core": {"core", "offload", "kernels"},
    "models": {"models"},
    "ir": {"ir"},
    "runtime": {"runtime", "ir", "core", "offload", "kernels"},
    "public": {"public", "runtime", "ir", "core", "offload", "kernels"},
    "tools": {"tools", "public", "runtime", "ir", "core", "offload", "kernels", "models"},
    "benchmarks": {"benchmarks", "public", "runtime", "ir", "core", "offload", "kernels", "models"},
    "examples": {"public", "cli"},
}


def layer_of(path):
    """Layer of a repository-relative file path or Bazel package/target ('pkg:name')."""
    pkg, _, name = path.partition(":")
    if pkg in ("zeropp/zeropp.h", "zeropp/trainer.cc") or (pkg == "zeropp" and name == "zeropp"):
        return "public"
    if pkg.startswith("zeropp/cli"):
        return "cli"
    top = pkg.split("/")[0]
    if pkg.startswith("scheduler/runtime"):
        return "runtime"
    return {"scheduler": "ir", "zeropp": "core", "offload": "offload", "kernels": "kernels", "models": "models",
            "tools": "tools", "benchmarks": "benchmarks", "examples": "examples"}.get(top)


def allowed(src, dst):
    if src is None or dst is None or src == dst:
        return True
    if dst == "cli":  # command-line helpers: for tools, benchmarks and examples only
        return src in ("tools", "benchmarks", "examples", "cli")
    if src == "cli":
        return dst in ALLOWED["core"]
    return dst in ALLOWED.get(src, set())


def violations(root):
    """Returns (violations, edges checked)."""
    bad = []
    edges = 0
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(("bazel-", ".")) and d not in ("tests", "third_party")]
        for f in files:
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, root)
            if f.endswith((".h", ".cc", ".cu", ".cuh")):
                for n, line in enumerate(open(full, encoding="utf-8", errors="replace"), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    edges += 1 if m else 0
                    if m and not allowed(layer_of(rel), layer_of(m.group(1))):
                        bad.append(f"{rel}:{n}: includes {m.group(1)} ({layer_of(rel)} -> {layer_of(m.group(1))})")
            elif f == "BUILD.bazel":
                pkg = os.path.relpath(dirpath, root)
                text = open(full, encoding="utf-8").read()
                for block in re.finditer(r'(\w+)\(\s*name = "([^"]+)"(.*?)\n\)', text, re.S):
                    src = layer_of(f"{pkg}:{block.group(2)}")
                    for label in re.findall(r'"(//[^"]*|:[^"]+)"', block.group(3)):
                        if label.startswith("//visibility") or label.startswith("//:"):
                            continue
                        target = f"{pkg}{label}" if label.startswith(":") else label[2:]
                        dst_pkg, _, dst_name = target.partition(":")
                        dst_name = dst_name or dst_pkg.split("/")[-1]
                        edges += 1
                        if not allowed(src, layer_of(f"{dst_pkg}:{dst_name}")):
                            bad.append(f"{pkg}/BUILD.bazel {block.group(2)}: depends on {label} "
                                       f"({src} -> {layer_of(dst_pkg + ':' + dst_name)})")
    return bad, edges


def main():
    here = os.path.realpath(__file__)
    root = os.path.dirname(os.path.dirname(here))
    # The checker must catch a planted violation: the core including the runtime, and a
    # benchmark including a tool.
    assert not allowed(layer_of("zeropp/engine.cc"), layer_of("scheduler/runtime/executor.h"))
    assert not allowed(layer_of("benchmarks/x.cc"), layer_of("tools/train_config.h"))
    assert not allowed(layer_of("scheduler/schedule.cc"), layer_of("zeropp/engine.h"))
    assert not allowed(layer_of("examples/llama.cc"), layer_of("scheduler/runtime/executor.h"))
    assert allowed(layer_of("zeropp/trainer.cc"), layer_of("scheduler/runtime/executor.h"))
    bad, edges = violations(root)
    for b in bad:
        print("VIOLATION:", b)
    ok = not bad and edges > 200  # the tree has about 280 include and dependency edges
    print(f"checked {edges} include and Bazel dependency edges under {root}")
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
