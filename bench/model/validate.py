#!/usr/bin/env python3
"""Validates the cost model against real runs on this machine (docs/model.md).

Each round, in one invocation, so the machine is the same for all three:
  1. measures the model's inputs   (build/bench/model/model_calibrate)
  2. runs the real cluster          (slip bench ... compare, 3 processes over tcp),
                                     and the first design once more after the others
  3. predicts the same runs          (slip sim --perf this-machine --model <round's file>)
and prints prediction vs measurement per design and thread count, with the
error of every cell; with several rounds, the median of each.

  bench/model/validate.py [--build build] [--rounds 2] [--threads 1,16]
                          [--designs rpc-kv,rowan-kv,...] [--seconds 5] [--workload a]
                          [--records 10000] [--value-size 1000] [--markdown FILE]
                          [--keep DIR | --replay DIR]

--keep DIR saves each round's calibration and real measurements there;
--replay DIR predicts those rounds again without measuring anything (the
predictions are deterministic, the real runs are the slow, noisy part):
how a change to the model is compared on the same measurements.

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

# A real run that lost this share of its window (%) to steal is marked disturbed.
STEAL_MARK = 5.0


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"validate: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


NOAUTH = "+noauth"

# The designs whose GETs take one path (the primary's worker answers from
# its store over RPC): on a workload of reads only, their real runs in a
# round are repeats of one measurement, and their spread is the machine's.
SAME_READ_PATH = ("rpc-kv", "rowan-kv", "rwrite-kv", "batch-kv", "share-kv", "tailwind")


def real_runs(a, threads):
    """The clusters without a secret: the model has no step for signing
    frames (the papers' systems do not authenticate either)."""
    env = dict(os.environ, TMPDIR="/dev/shm")
    targets = ",".join(d + NOAUTH for d in a.designs.split(","))
    out = run([f"{a.build}/slip", "bench", "--workload", a.workload, "--value-size", str(a.value_size), "--records",
               str(a.records), "--seconds", str(a.seconds), "--warmup", "1", "--threads", str(threads),
               "compare", "--targets", targets], env=env)
    design_of = lambda name: name[:-len(NOAUTH)] if name.endswith(NOAUTH) else name
    got, cpu, kinds = {}, {}, {}
    section = out[out.index("comparison"):]
    for line in section.splitlines()[2:]:
        f = line.split()
        if len(f) >= 6 and design_of(f[0]) in a.designs.split(","):
            got[design_of(f[0])] = (float(f[2]), float(f[4]))  # ops/s, p50 us
    # Each target's block: "D: workload ...", its latency lines, "cpu us/op   client X  worker Y ...",
    # "host cpu ...", "per op ..." and, last, "rpc sends ...".
    design = last = None
    for line in out[:out.index("comparison")].splitlines():
        if design_of(line.split(":")[0]) in got and ": workload" in line:
            design = last = design_of(line.split(":")[0])
        elif last and line.strip().startswith("rpc sends"):
            # "rpc sends   client 1.00 frames in 0.54 messages  servers 1.00 frames in 0.37 messages  (per op)"
            f = line.split()
            cpu.setdefault(last, {})["msg_client"] = float(f[f.index("client") + 4])
            cpu[last]["msg_server"] = float(f[f.index("servers") + 4])
        elif design and line.split()[:1] in (["read"], ["update"]):
            kinds.setdefault(design, {})[line.split()[0]] = float(line.split()[1])
        elif design and line.strip().startswith("host cpu"):
            # "host cpu    busy 89.2% (softirq 12.6%)  idle 10.6%  steal 0.2%  of 2 cores"
            f = line.split()
            cpu.setdefault(design, {})["host_busy"] = float(f[f.index("busy") + 1].rstrip("%"))
            cpu[design]["host_steal"] = float(f[f.index("steal") + 1].rstrip("%"))
        elif design and line.strip().startswith("cpu us/op"):
            f = line.split()[2:]
            v = {f[i]: f[i + 1] for i in range(0, len(f) - 1, 2)}
            num = lambda k: float(v[k]) if k in v and v[k] != "-" else 0.0
            cpu.setdefault(design, {}).update({"client": num("client"), "worker": num("worker") + num("backup"),
                                               "nic": num("nic"), "digest": num("digest")})
        elif design and line.strip().startswith("per op"):
            design = None
    return got, cpu, kinds


def run_again(a, threads):
    """The first design once more, alone, after the compare: how far the
    machine moved while the round measured (the same binary gave 44,030 and,
    25 minutes later, 31,965 ops/s on 2026-11-29, on unchanged micro-benchmarks)."""
    env = dict(os.environ, TMPDIR="/dev/shm")
    first = a.designs.split(",")[0]
    out = run([f"{a.build}/slip", "bench", "--workload", a.workload, "--value-size", str(a.value_size), "--records",
               str(a.records), "--seconds", str(a.seconds), "--warmup", "1", "--threads", str(threads),
               "--target", first + NOAUTH], env=env)
    for line in out.splitlines():
        if line.strip().startswith("throughput"):
            return {"design": first, "ops": float(line.split()[1])}
    sys.exit(f"validate: no throughput in the repeated run of {first}:\n{out[-2000:]}")


def predictions(a, model, threads):
    got = {}
    for d in a.designs.split(","):
        out = run([f"{a.build}/slip", "sim", "--perf", "this-machine", "--model", model, "--design", d, "--threads",
                   str(threads), "--nodes", "3", "--shards", "24", "--records", str(a.records), "--value-size",
                   str(a.value_size), "--measure", "0.5", "--workload", a.workload, "--json"])
        j = json.loads(out.strip().splitlines()[-1])
        msgs = j.get("messages", {})
        got[d] = (j["ops_per_sec"], j["p50_us"],
                  dict(j["cpu_us"], host_busy=100 * j["busy"], msg_client=msgs.get("client"),
                       msg_server=msgs.get("worker")),
                  {"read": j["read_p50_us"], "update": j["write_p50_us"]})
    return got


# The waker's share of a hand-over to a parked executor of the same process
# (model_calibrate, 2026-11-29: 0.404-0.423 over five kept runs), for
# calibrations that did not split it.
HAND_OVER_WAKER_SHARE = 0.41

# The RPC layer's work on one message at one end, ns (rpc_overhead_bench
# on 2026-11-27: 377-385 ns per round trip, a quarter of it).
RPC_CALL_2026_11_27 = 95.0

# An application thread's side of a synchronous call, cold (model_calibrate
# on 2026-11-29, when the input was added): ns, and ns per byte an update
# writes.
APP_OP_2026_11_29 = (1098.0, 2.137)

# Linux's sched_migration_cost default, ns (kernel/sched/fair.c): how long
# a thread off a core stays cache-hot, not moved by load balancing.
LINUX_MIGRATION_COST_NS = 500000


def migrated(model, tmp, r):
    """A kept calibration from before runtime.migration_cost_ns (2026-11-29:
    Linux's default then), or from before wakeup_busy, switch_in or rpc_call were
    inputs (2026-11-27), DINOMO's and RubbleDB's steps (2026-11-28), or
    wakeup_local and switch_in_local (2026-11-29: its hand-over taken out of
    client_op and split HAND_OVER_WAKER_SHARE to the waker), or app_op
    (2026-11-29: the application thread's side of a call, as measured that
    day), with
    them derived: the first two from what it
    recorded (the hand-over between two threads of one core, and the woken
    thread's share of a wake-up: 0.4, the middle of 37-44% measured, if it
    recorded none), rpc_call as measured that day and taken out of the
    message inputs. Any other calibration as it is."""
    with open(model) as f:
        doc = json.load(f)
    inputs, seen = doc["inputs"], doc.get("observed", {})
    later = ("cache_lookup", "merge", "lsm_write", "lsm_get", "flush", "compaction")
    missing = [k for k in ("wakeup_busy", "switch_in", "rpc_call", "wakeup_local", "switch_in_local", "app_op") + later
               if k not in inputs]
    runtime = doc.setdefault("runtime", {})
    if "migration_cost_ns" not in runtime:
        # Before 2026-11-29 the model's hosts had one shared run queue; a
        # calibration since records the kernel's migration cost, which puts
        # them on Linux's per-core queues: Linux's default, as this VM's
        # kernel (which does not show its own) has it.
        runtime["migration_cost_ns"] = LINUX_MIGRATION_COST_NS
        runtime["migration_cost_source"] = "derived: Linux's default sched_migration_cost"
        missing.append("runtime.migration_cost_ns")
    if not missing:
        return model
    # DINOMO's and RubbleDB's steps (inputs since 2026-11-28): no validated
    # design takes them, so any number serves; 0, said so.
    for k in later:
        inputs.setdefault(k, {"per_op_ns": 0.0, "per_byte_ns": 0.0,
                              "source": "derived: a calibration from before the input; no validated design takes the step"})
    if "rpc_call" not in inputs:
        # Before rpc_call (2026-11-27) the RPC layer's work was inside the
        # message inputs, measured by a ping-pong that paid it at both ends
        # of each message: take it out, as the calibration now does, with
        # the value measured that day (bench/micro/rpc_overhead_bench).
        for k in ("message_send", "message_receive"):
            inputs[k]["per_op_ns"] = max(0.0, inputs[k]["per_op_ns"] - RPC_CALL_2026_11_27)
        inputs["rpc_call"] = {"per_op_ns": RPC_CALL_2026_11_27, "per_byte_ns": 0.0,
                              "source": "derived: the RPC layer's cost measured 2026-11-27"}
    if "app_op" not in inputs:
        inputs["app_op"] = {"per_op_ns": APP_OP_2026_11_29[0], "per_byte_ns": APP_OP_2026_11_29[1],
                            "source": "derived: the application thread's side of a call measured 2026-11-29"}
    if "wakeup_busy" not in inputs:
        hand_over = seen.get("hand_over_one_core_ns")
        if hand_over is None:
            sys.exit(f"validate: {model} has no wakeup_busy input and no hand_over_one_core_ns observation to derive "
                     "it from: it cannot be replayed by this model")
        inputs["wakeup_busy"] = {"per_op_ns": float(hand_over), "per_byte_ns": 0.0,
                                 "source": "derived: observed hand_over_one_core_ns"}
    if "switch_in" not in inputs:
        share = seen.get("wakeup_woken_thread_share") or 0.4
        inputs["switch_in"] = {"per_op_ns": round(share * inputs["wakeup"]["per_op_ns"]), "per_byte_ns": 0.0,
                               "source": f"derived: {share} of the wake-up"}
    if "wakeup_local" not in inputs:
        # Before 2026-11-29 the hand-over to the client's executor was in
        # client_op, both sides' CPU (hand_over_to_parked_ns): take it out
        # and split it as a later calibration found it.
        hand_over = seen.get("hand_over_to_parked_ns")
        if hand_over is None:
            sys.exit(f"validate: {model} has no wakeup_local input and no hand_over_to_parked_ns observation to "
                     "derive it from: it cannot be replayed by this model")
        share = seen.get("hand_over_waker_share") or HAND_OVER_WAKER_SHARE
        inputs["client_op"]["per_op_ns"] = max(0.0, inputs["client_op"]["per_op_ns"] - hand_over)
        inputs["wakeup_local"] = {"per_op_ns": round(share * hand_over), "per_byte_ns": 0.0,
                                  "source": f"derived: {share} of observed hand_over_to_parked_ns"}
        inputs["switch_in_local"] = {"per_op_ns": round((1 - share) * hand_over), "per_byte_ns": 0.0,
                                     "source": f"derived: {1 - share:.3f} of observed hand_over_to_parked_ns"}
    out = os.path.join(tmp, f"migrated-{r}.json")
    with open(out, "w") as f:
        json.dump(doc, f)
    used = ", ".join(f"{k} {inputs[k]['per_op_ns']:.0f} ns" if k in inputs else f"{k} {runtime['migration_cost_ns']} ns"
                     for k in missing)
    print(f"round {r + 1}: {model} predates {', '.join(missing)}: using {used}", flush=True)
    return out


def noise_floor(a, threads, cells, again):
    """What ±25% means on this machine: how far the real runs of one
    configuration fall apart. Across rounds, each design's real throughput
    (max / min); within a round, the first design run again after the
    others; and on a workload of reads only, across the designs that read
    by one path within a round."""
    out = ["", "Real repeatability (throughput, max / min of runs that measure the same thing):", ""]
    for t in threads:
        ratios = []
        threads_said = f"{t} thread" + ("s" if t != 1 else "")
        for r, x in enumerate(again.get(t, [])):
            first = cells.get((x["design"], t), []) if x else []
            if r < len(first) and first[r][0][0]:
                ops0 = first[r][0][0]
                out.append(f"- {threads_said}, round {r + 1}: {x['design']} {ops0:.0f} ops/s first, {x['ops']:.0f} "
                           f"run again after the other designs ({max(ops0, x['ops']) / min(ops0, x['ops']):.2f}x)")
        for d in a.designs.split(","):
            ops = [r[0] for r, _ in cells.get((d, t), []) if r[0]]
            if len(ops) > 1:
                ratios.append(max(ops) / min(ops))
        if ratios:
            out.append(f"- {threads_said}, one design across the rounds that measured it: median "
                       f"{statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x")
        if a.workload != "c":
            continue
        same = [d for d in SAME_READ_PATH if d in a.designs.split(",")]
        for r in range(a.rounds):
            ops = [cells[(d, t)][r][0][0] for d in same if (d, t) in cells and cells[(d, t)][r][0][0]]
            if len(ops) > 1:
                out.append(f"- {threads_said}, round {r + 1}, the {len(ops)} designs reading by one path: "
                           f"{min(ops):.0f}-{max(ops):.0f} ops/s ({max(ops) / min(ops):.2f}x)")
    return out if len(out) > 3 else []


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", default="1,16")
    p.add_argument("--designs", default=DESIGNS)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--records", type=int, default=10000)
    p.add_argument("--value-size", type=int, default=1000)
    p.add_argument("--workload", default="a", choices=["a", "b", "c", "d", "f"],
                   help="the YCSB mix of every run (the validation's cells are a's; c, all reads, "
                        "shows errors that a's mix of reads and updates offsets)")
    p.add_argument("--markdown", default="")
    p.add_argument("--keep", default="", help="save each round's calibration and measurements in this directory")
    p.add_argument("--replay", default="", help="predict the rounds saved by --keep, measuring nothing")
    a = p.parse_args()
    if a.keep and a.replay:
        sys.exit("validate: --keep and --replay exclude each other")
    # What the real runs were: a replay predicts the same runs or none.
    setup = {"threads": a.threads, "designs": a.designs, "seconds": a.seconds, "records": a.records,
             "value_size": a.value_size}
    if a.workload != "a":  # kept runs from before the option are a's
        setup["workload"] = a.workload
    if a.replay:
        try:
            with open(os.path.join(a.replay, "setup.json")) as f:
                kept = json.load(f)
        except OSError:
            sys.exit(f"validate: {a.replay} holds no rounds saved by --keep (no setup.json)")
        if kept["setup"] != setup:
            sys.exit(f"validate: {a.replay} was measured with {kept['setup']}, not {setup}")
        a.rounds = kept["rounds"]
    elif a.keep:
        if os.path.exists(a.keep) and os.listdir(a.keep):
            sys.exit(f"validate: --keep {a.keep} is not empty")
        os.makedirs(a.keep, exist_ok=True)
        with open(os.path.join(a.keep, "setup.json"), "w") as f:
            json.dump({"setup": setup, "rounds": a.rounds}, f)
    threads = [int(t) for t in a.threads.split(",")]
    cells = {}  # (design, threads) -> list of ((ops/s, p50, read p50, update p50) real, the same model)
    roles = {}  # (design, threads) -> list of (real cpu by role, model cpu by role)
    stolen = {}  # (design, threads) -> per round, the real run's steal % (None: not measured)
    again = {}  # threads -> per round, the first design run again after the others (None: not kept)
    tmp_dir = tempfile.TemporaryDirectory(prefix="slip-model-")
    tmp = tmp_dir.name
    for r in range(a.rounds):
        model = os.path.join(a.replay or a.keep or tmp, f"model-{r}.json")
        saved = os.path.join(a.replay or a.keep or tmp, f"real-{r}.json")
        runs = {}
        if a.replay:
            try:
                with open(saved) as f:
                    runs = json.load(f)
            except OSError:
                sys.exit(f"validate: {saved} is missing (was the --keep run cut short?)")
            model = migrated(model, tmp, r)
        else:
            print(f"round {r + 1}: calibrating", flush=True)
            print(run([f"{a.build}/bench/model/model_calibrate", "--out", model]), flush=True)
        for t in threads:
            if a.replay:
                if str(t) not in runs:
                    sys.exit(f"validate: {saved} has no runs at {t} threads")
                real, real_cpu, real_kinds = ({d: tuple(v) if isinstance(v, list) else v for d, v in x.items()}
                                              for x in runs[str(t)][:3])
                # Rounds kept before the repeated run (2026-11-29) have none.
                again.setdefault(t, []).append(runs[str(t)][3] if len(runs[str(t)]) > 3 else None)
            else:
                print(f"round {r + 1}: real runs, {t} threads", flush=True)
                real, real_cpu, real_kinds = real_runs(a, t)
                again.setdefault(t, []).append(run_again(a, t))
                runs[str(t)] = [real, real_cpu, real_kinds, again[t][-1]]
                with open(saved, "w") as f:
                    json.dump(runs, f)
            pred = predictions(a, model, t)
            for d in a.designs.split(","):
                # A design the real run did not report stays in the table,
                # its cells missed.
                rk, mk = real_kinds.get(d, {}), pred[d][3]
                rv = real.get(d, (None, None))
                cells.setdefault((d, t), []).append(((*rv, rk.get("read"), rk.get("update")),
                                                     (pred[d][0], pred[d][1], mk["read"], mk["update"])))
                stolen.setdefault((d, t), []).append(real_cpu.get(d, {}).get("host_steal"))
                if d in real_cpu:
                    roles.setdefault((d, t), []).append((real_cpu[d], pred[d][2]))
    # The cells: throughput, and p50 per kind of operation as slip bench
    # reports it. YCSB-A's overall p50 is not a cell: half reads, half
    # updates, whose latencies differ ~2.5x at one thread, so the overall
    # median falls in the gap between the two modes, where a shift of the
    # mix by a fraction of a percent moves it by tens of microseconds. It is
    # shown, with its error, below.
    metrics = (("ops/s", 0, "{:.0f}"), ("read p50 us", 2, "{:.1f}"), ("update p50 us", 3, "{:.1f}"))
    head = "| design | threads | " + " | ".join(f"real {m} | model | error" for m, _, _ in metrics) + " |"
    lines = [head, "|---|---:|" + "---:|" * (3 * len(metrics))]
    within = total = 0
    overall = []
    for t in threads:
        for d in a.designs.split(","):
            rs = cells.get((d, t))
            if not rs:
                continue
            cols, per_round = [], []
            for _, i, fmt in metrics:
                # A kind of operation the workload lacks (c's updates) is no cell.
                if all(not r[i] and not m[i] for r, m in rs):
                    cols.append("- | - | -")
                    per_round.append("-")
                    continue
                total += 1
                # A cell passes on the median error over the rounds that
                # measured it; one no round measured (or measured as 0) misses.
                pairs = [(r[i], m[i]) for r, m in rs if r[i]]
                # A round whose real run lost 5% or more of its window to steal (a VM
                # neighbour) is marked "s": its error counts, but says little about the model.
                marks = ["s" if (x or 0) >= STEAL_MARK else "" for (r, _), x in zip(rs, stolen[(d, t)]) if r[i]]
                if not pairs:
                    cols.append("- | - | miss")
                    per_round.append("-")
                    continue
                errs = [(m - r) / r * 100 for r, m in pairs]
                e = statistics.median(errs)
                ok = abs(e) <= 25
                within += ok
                cols.append(fmt.format(statistics.median(r for r, _ in pairs)) + " | " +
                            fmt.format(statistics.median(m for _, m in pairs)) + f" | {e:+.1f}%" +
                            ("" if ok else " ✗") +
                            # One round: no per-round list, so its mark goes on the cell.
                            (" s" if len(rs) == 1 and marks and marks[0] else ""))
                per_round.append("/".join(f"{x:+.0f}{k}" for x, k in zip(errs, marks)))
            lines.append(f"| {d} | {t} | " + " | ".join(cols) + " |" +
                         (f" rounds: {' '.join(per_round)}" if len(rs) > 1 else ""))
            measured = [(r[1], m[1]) for r, m in rs if r[1]]
            if measured:
                errs_p = [(m - r) / r * 100 for r, m in measured]
                overall.append(f"| {d} | {t} | {statistics.median(r for r, _ in measured):.1f} | "
                               f"{statistics.median(m for _, m in measured):.1f} | {statistics.median(errs_p):+.0f}% |")
    lines.append("")
    lines.append(f"{within} of {total} cells within ±25% (medians of {a.rounds} round(s)); "
                 f"s: a round whose real run lost {STEAL_MARK:.0f}% or more of its window to steal.")
    lines.append("")
    lines.append("Overall p50 (not a cell: it falls between the reads' and the updates' modes), us:")
    lines.append("")
    lines.append("| design | threads | real | model | error |")
    lines.append("|---|---:|---:|---:|---:|")
    lines.extend(overall)
    lines.append("")
    lines.append("CPU per operation by role, us (real: threads' clocks summed over the nodes; model: virtual), "
                 "and the host's busy share (real: /proc/stat over the window, every process; model: its cores), "
                 "medians:")
    lines.append("")
    lines.append("| design | threads | client real/model | worker real/model | nic real/model | digest real/model "
                 "| host busy % real/model | real steal % |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        for d in a.designs.split(","):
            rs = roles.get((d, t))
            if not rs:
                continue
            cols = []
            for k in ("client", "worker", "nic", "digest", "host_busy"):
                # Real runs kept before slip bench measured its host (2026-11-29) have no host_busy.
                real_k = [r[k] for r, _ in rs if k in r]
                rv = f"{statistics.median(real_k):.1f}" if real_k else "-"
                mv = statistics.median(m[k] for _, m in rs)
                cols.append(f"{rv} / {mv:.1f}")
            steal = [r["host_steal"] for r, _ in rs if "host_steal" in r]
            cols.append(f"{statistics.median(steal):.1f}" if steal else "-")
            lines.append(f"| {d} | {t} | " + " | ".join(cols) + " |")
    # Real runs kept before slip bench counted RPC sends (2026-11-29) have none.
    sent = [(d, t, rs) for t in threads for d in a.designs.split(",")
            for rs in [[(r, m) for r, m in roles.get((d, t), []) if "msg_client" in r]] if rs]
    if sent:
        lines += ["", "Fabric messages sent per operation (real: slip bench's rpc sends, the RPC channels'; model: its "
                  "message_send steps; one-sided posts are neither), medians:", "",
                  "| design | threads | client real/model | servers real/model |", "|---|---:|---:|---:|"]
        for d, t, rs in sent:
            # A model value is missing where the model's JSON predates the count.
            model_k = lambda k: [m[k] for _, m in rs if m.get(k) is not None]
            cols = [f"{statistics.median(r[k] for r, _ in rs):.2f} / " +
                    (f"{statistics.median(model_k(k)):.2f}" if model_k(k) else "-")
                    for k in ("msg_client", "msg_server")]
            lines.append(f"| {d} | {t} | " + " | ".join(cols) + " |")
    lines.extend(noise_floor(a, threads, cells, again))
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
