#!/usr/bin/env python3
"""Validates the cost model against real runs on this machine (docs/model.md).

Each round, in one invocation, so the machine is the same for all three:
  1. measures the model's inputs   (build/bench/model/model_calibrate)
  2. runs the real cluster          (slip bench ... compare, 3 processes over tcp)
  3. predicts the same runs          (slip sim --perf this-machine --model <round's file>)
and prints prediction vs measurement per design and thread count, with the
error of every cell; with several rounds, the median of each.

  bench/model/validate.py [--build build] [--rounds 2] [--threads 1,16]
                          [--designs rpc-kv,rowan-kv,...] [--seconds 5]
                          [--records 10000] [--value-size 1000] [--markdown FILE]

Glue only: every number comes from the two C++ programs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DESIGNS = "rpc-kv,rowan-kv,rwrite-kv,batch-kv,share-kv,tailwind,erda"


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"validate: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def real_runs(a, threads):
    env = dict(os.environ, TMPDIR="/dev/shm")
    out = run([f"{a.build}/slip", "bench", "--workload", "a", "--value-size", str(a.value_size), "--records",
               str(a.records), "--seconds", str(a.seconds), "--warmup", "1", "--threads", str(threads),
               "compare", "--targets", a.designs], env=env)
    got, cpu = {}, {}
    section = out[out.index("comparison"):]
    for line in section.splitlines()[2:]:
        f = line.split()
        if len(f) >= 6 and f[0] in a.designs.split(","):
            got[f[0]] = (float(f[2]), float(f[4]))  # ops/s, p50 us
    # Each target's block: "D: workload ..." then "cpu us/op   client X  worker Y  backup Z  nic W ...".
    design = None
    for line in out[:out.index("comparison")].splitlines():
        if line.split(":")[0] in got and ": workload" in line:
            design = line.split(":")[0]
        elif design and line.strip().startswith("cpu us/op"):
            f = line.split()[2:]
            v = {f[i]: f[i + 1] for i in range(0, len(f) - 1, 2)}
            num = lambda k: float(v[k]) if k in v and v[k] != "-" else 0.0
            cpu[design] = {"client": num("client"), "worker": num("worker") + num("backup"), "nic": num("nic"),
                           "digest": num("digest")}
            design = None
    return got, cpu


def predictions(a, model, threads):
    got = {}
    for d in a.designs.split(","):
        out = run([f"{a.build}/slip", "sim", "--perf", "this-machine", "--model", model, "--design", d, "--threads",
                   str(threads), "--nodes", "3", "--shards", "24", "--records", str(a.records), "--value-size",
                   str(a.value_size), "--measure", "0.5", "--json"])
        j = json.loads(out.strip().splitlines()[-1])
        got[d] = (j["ops_per_sec"], j["p50_us"], j["cpu_us"])
    return got


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", default="1,16")
    p.add_argument("--designs", default=DESIGNS)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--records", type=int, default=10000)
    p.add_argument("--value-size", type=int, default=1000)
    p.add_argument("--markdown", default="")
    a = p.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    cells = {}  # (design, threads) -> list of (real, model)
    roles = {}  # (design, threads) -> list of (real cpu by role, model cpu by role)
    tmp_dir = tempfile.TemporaryDirectory(prefix="slip-model-")
    tmp = tmp_dir.name
    for r in range(a.rounds):
        model = os.path.join(tmp, f"model-{r}.json")
        print(f"round {r + 1}: calibrating", flush=True)
        print(run([f"{a.build}/bench/model/model_calibrate", "--out", model]), flush=True)
        for t in threads:
            print(f"round {r + 1}: real runs, {t} threads", flush=True)
            real, real_cpu = real_runs(a, t)
            pred = predictions(a, model, t)
            for d in a.designs.split(","):
                if d in real:
                    cells.setdefault((d, t), []).append((real[d], pred[d]))
                if d in real_cpu:
                    roles.setdefault((d, t), []).append((real_cpu[d], pred[d][2]))
    lines = ["| design | threads | real ops/s | model ops/s | error | real p50 us | model p50 us | error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    within = total = 0
    for t in threads:
        for d in a.designs.split(","):
            rs = cells.get((d, t))
            if not rs:
                continue
            errs_t = [(m[0] - r[0]) / r[0] * 100 for r, m in rs]
            errs_p = [(m[1] - r[1]) / r[1] * 100 for r, m in rs]
            real_t = statistics.median(r[0] for r, _ in rs)
            real_p = statistics.median(r[1] for r, _ in rs)
            mod_t = statistics.median(m[0] for _, m in rs)
            mod_p = statistics.median(m[1] for _, m in rs)
            et, ep = statistics.median(errs_t), statistics.median(errs_p)
            total += 2
            within += (abs(et) <= 25) + (abs(ep) <= 25)
            per_round = " ".join(f"{e:+.0f}/{f:+.0f}" for e, f in zip(errs_t, errs_p))
            lines.append(f"| {d} | {t} | {real_t:.0f} | {mod_t:.0f} | {et:+.0f}% | {real_p:.1f} | {mod_p:.1f} | "
                         f"{ep:+.0f}% |" + (f" rounds: {per_round}" if len(rs) > 1 else ""))
    lines.append("")
    lines.append(f"{within} of {total} cells within ±25% (medians of {a.rounds} round(s)).")
    lines.append("")
    lines.append("CPU per operation by role, us (real: threads' clocks summed over the nodes; model: virtual), "
                 "medians:")
    lines.append("")
    lines.append("| design | threads | client real/model | worker real/model | nic real/model | digest real/model |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for t in threads:
        for d in a.designs.split(","):
            rs = roles.get((d, t))
            if not rs:
                continue
            cols = []
            for k in ("client", "worker", "nic", "digest"):
                rv = statistics.median(r[k] for r, _ in rs)
                mv = statistics.median(m[k] for _, m in rs)
                cols.append(f"{rv:.1f} / {mv:.1f}")
            lines.append(f"| {d} | {t} | " + " | ".join(cols) + " |")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
