#!/usr/bin/env python3
"""What Linux's scheduler did to a real cluster's threads, per operation:
the evidence the cost model's scheduler is held against (docs/model.md,
"The scheduler").

    bench/model/sched-summary.py PERF_SCHED_DATA OPS_PER_SEC

Record it inside a `slip bench` window, e.g.

    TMPDIR=/dev/shm build/slip bench --workload a --value-size 1000 --records 10000 \\
        --seconds 12 --warmup 1 --threads 16 compare --targets rpc-kv+noauth &
    sleep 7; perf sched record -o sched.data -- sleep 2

and pass the throughput the bench printed. Prints, by role (a thread name
with its node number dropped: `node`, `client`, `slip` the application
threads), switches per operation (S: it blocked, R: preempted), its CPU per
switch and per operation, and its wait for a core after a wake-up; each
core's share by role; and, for every involuntary switch, who ran next and
whether the very thread it preempted had just woken it (within 30 us) —
Linux's wake-up preemption.
"""
import collections
import re
import subprocess
import sys

WOKEN_WITHIN = 30e-6  # seconds


def role(task):
    name = re.sub(r"\[.*", "", task)
    return re.sub(r"^node\d+$", "node", name)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, ops = sys.argv[1], float(sys.argv[2])
    out = subprocess.run(["perf", "sched", "timehist", "-w", "--state", "-i", data],
                         capture_output=True, text=True, check=True).stdout
    by_role = collections.defaultdict(collections.Counter)
    by_core = collections.Counter()
    after_preemption = collections.Counter()
    last_wake = {}  # wakee task -> (time, waker task)
    preempted_on = {}  # core -> (task preempted, time)
    first = last = None
    for line in out.splitlines():
        f = line.split()
        if len(f) < 3 or not re.match(r"^\d+\.\d+$", f[0]):
            continue
        t, core, task = float(f[0]), f[1], f[2]
        first = t if first is None else first
        last = t
        if "awakened:" in line:
            last_wake[line.split("awakened:")[1].strip()] = (t, task)
            continue
        if len(f) < 7:
            continue
        wait_ms, delay_ms, run_ms, state = float(f[3]), float(f[4]), float(f[5]), f[6]
        r = role(task)
        s = by_role[r]
        s["switches"] += 1
        s["run"] += run_ms
        s["delay"] += delay_ms
        s["S" if state.startswith("S") else "R" if state.startswith("R") else "other"] += 1
        by_core[(core, r if r in ("node", "client", "slip", "<idle>") else "other")] += run_ms
        if core in preempted_on:
            who, at = preempted_on.pop(core)
            woke = last_wake.get(task)
            if woke and 0 <= at - woke[0] < WOKEN_WITHIN:
                by = "the thread it preempted" if woke[1] == who else role(woke[1])
                after_preemption[f"{role(who)} -> {r}, woken by {by}"] += 1
            else:
                after_preemption[f"{role(who)} -> {r}, not just woken"] += 1
        if state.startswith("R"):
            preempted_on[core] = (task, t)
    if first is None:
        sys.exit(f"sched-summary: no switches in {data}")
    n = ops * (last - first)
    print(f"{last - first:.3f} s, {n:.0f} operations")
    print("| role | switches/op | blocked (S) | preempted (R) | CPU per switch us | CPU per op us | wait for a core per switch us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r, s in sorted(by_role.items(), key=lambda kv: -kv[1]["run"]):
        if 1000 * s["run"] / n < 0.5:  # kernel threads, the control threads
            continue
        print(f"| {r} | {s['switches'] / n:.2f} | {s['S'] / n:.2f} | {s['R'] / n:.2f} | "
              f"{1000 * s['run'] / s['switches']:.1f} | {1000 * s['run'] / n:.1f} | {1000 * s['delay'] / s['switches']:.1f} |")
    print()
    for core in sorted({c for c, _ in by_core}):
        total = sum(v for (c, _), v in by_core.items() if c == core)
        shares = ", ".join(f"{r} {100 * v / total:.0f}%" for (c, r), v in sorted(by_core.items()) if c == core)
        print(f"core {core}: {shares}")
    print()
    total = sum(after_preemption.values())
    own = sum(k for what, k in after_preemption.items() if what.endswith("the thread it preempted"))
    print(f"after each of {total} involuntary switches, who ran next "
          f"({100 * own / total:.1f}% a thread woken by the one it preempted):")
    for what, k in after_preemption.most_common(10):
        print(f"  {100 * k / total:5.1f}%  {what}")


if __name__ == "__main__":
    main()
