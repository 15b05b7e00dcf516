#!/usr/bin/env python3
"""Node lists derived from openb's (the FGD experiments' cluster), to check that a placement rule
does not depend on that one pool's shape: CPU x2 and x1/2, memory x1/2, its 8-GPU nodes split into
2- or 4-GPU nodes (CPU and memory split with them), its 4-GPU nodes paired into 8-GPU nodes, its
models spread evenly over six, and two thirds of its nodes made T4 with 3/4 of the CPU.

Usage: bench/pools/derive_pools.py OPENB_NODE_LIST OUT_FOLDER
Writes OUT_FOLDER/<pool>.csv in the openb node-list format (sn,cpu_milli,memory_mib,gpu,model).
"""
import csv
import os
import sys

FIELDS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]


def write(folder, name, rows):
    with open(os.path.join(folder, f"{name}.csv"), "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow(dict(row, sn=f"{name}-{i:05d}"))


def scaled(node, field, factor):
    return dict(node, **{field: str(int(int(node[field]) * factor))})


def split(node, size):
    gpus = int(node["gpu"])
    if gpus <= size:
        return [node]
    parts = gpus // size
    return [dict(node, gpu=str(size), cpu_milli=str(int(node["cpu_milli"]) // parts),
                 memory_mib=str(int(node["memory_mib"]) // parts)) for _ in range(parts)]


def paired(nodes):
    out, waiting = [], []
    for node in nodes:
        if node["gpu"] != "4":
            out.append(node)
            continue
        waiting.append(node)
        if len(waiting) == 2:
            a, b = waiting
            out.append(dict(a, gpu="8",
                            cpu_milli=str(int(a["cpu_milli"]) + int(b["cpu_milli"])),
                            memory_mib=str(int(a["memory_mib"]) + int(b["memory_mib"]))))
            waiting = []
    return out + waiting


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as source:
        nodes = list(csv.DictReader(source))
    folder = sys.argv[2]
    os.makedirs(folder, exist_ok=True)
    models = ["G2", "T4", "V100M32", "P100", "G3", "V100M16"]
    write(folder, "cpu_double", [scaled(n, "cpu_milli", 2) for n in nodes])
    write(folder, "cpu_half", [scaled(n, "cpu_milli", 0.5) for n in nodes])
    write(folder, "mem_half", [scaled(n, "memory_mib", 0.5) for n in nodes])
    write(folder, "gpu2", [part for n in nodes for part in split(n, 2)])
    write(folder, "gpu4", [part for n in nodes for part in split(n, 4)])
    write(folder, "gpu8", paired(nodes))
    write(folder, "models_even", [dict(n, model=models[i % len(models)]) for i, n in enumerate(nodes)])
    write(folder, "t4_heavy", [scaled(dict(n, model="T4" if i % 3 else n["model"]), "cpu_milli", 0.75)
                               for i, n in enumerate(nodes)])


if __name__ == "__main__":
    main()
