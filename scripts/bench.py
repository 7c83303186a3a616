#!/usr/bin/env python3
"""The benchmark behind scripts/bench (results: bench/RESULTS.md).

Generates Intel PT traces of about 10 MB, 100 MB and 1 GB with
`ptsim --repeat` from the workloads in fixtures/programs (cached under
target/bench/, regenerated when ptsim, the program or the settings change),
then runs these tools on each trace:

  ptdec -j1, ptdec on one core (taskset -c 0), ptdec (all cores),
  ptdec -j8                      writing FTF to out-j*.ftf in the outputs'
                                 folder (see below)
                                 (the -j outputs must be byte-identical)
  ptdec -jN sequential stacks    all cores, the call stacks built the other
  (or: stacks on the workers)    way than ptdec's default on this machine
                                 (PTDEC_SEQUENTIAL_STACKS=1 on more than 2
                                 CPUs, PTDEC_STACKS_AHEAD=1 on 2 or fewer):
                                 the same FTF
  ptdec report -j1               per-function totals and the 10 slowest calls
  ptdec report (all cores)       without --slowest, against one core's
  perf script --itrace=cr        to /dev/null
  ptbench-libipt                 libipt's block decoder alone (on the one-core
                                 rows' core, taskset -c 0)
  ptdec --decoder libipt|fast -j1, ptdec report --decoder fast on one
  core (taskset -c 0) with and without --slowest 10, ptbench-fast
                                 ptdec's own flow decoder (issue 23): the
                                 same FTF, and alone against bare libipt

`--only sideband` (not run otherwise) measures instead what a large
sideband costs `ptdec info` in memory: LLDB's multi-core bundle with one
core's context-switch file grown to 20 MB and 80 MB (its records
repeated, each copy later than the last), and that bundle as a perf.data
with 20 MB of SWITCH_CPU_WIDE (FINISHED_ROUND every 1000 records, and
none) or of MMAP2 records, made under target/bench/sideband/.

A real-hardware row (REAL: LLDB's multi-core bundle from
../shared/realdata, its cores' PT tiled to 30 MB under target/bench/, time
moved on from copy to copy) runs
the decoders alone, FTF and report on one core and both flow decoders,
`ptdec raw` of each core's trace on one core (the bytes of LLDB's,
simple-pt's or kAFL's trace files, without the context switches), and
says how many chunks the fast decoder handed to libipt (target: none):
`--only lldb-multicore` runs it alone.

The outputs (FTF, the Parquet datasets) go to a folder of their own in
/dev/shm (a tmpfs) where it has room for twice 200 times the trace's PT
(eight outputs of up to 25 times it), else to target/bench/, and
`--out-dir DIR` says where: writing 200 MB of FTF to this VM's ext4 cost
0.8-1.0 s of system time and 3 s of wall time in some runs and 0.1 s in
others (the kernel's writeback of the file before), which drowned
ptdec's own time in the FTF rows; a tmpfs costs the copy alone (0.07 s
for 200 MB). The table's last lines say where the outputs went; a tmpfs
folder is removed after its trace.

Each child's wall time, CPU time (user+sys) and peak RSS come from the
kernel (os.wait4). A ptdec run's output file is removed before it starts,
outside its timing (remove_output says why). Cells run `--runs` times (1
for the 1 GB traces), in rounds of one run of every tool (so that a busy
spell of the host slows all tools alike), and the median is printed. A cell whose estimated memory exceeds the budget is
skipped; every child runs under an address-space limit and a timeout.
After each trace, the FTF ptdec wrote is loaded into Perfetto's importer
(`ptdec check`, the trace_processor_shell named by $PT_TRACE_PROCESSOR,
where the user has one) and the result is printed under the table.
"""

import argparse
import atexit
import hashlib
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release")
BENCH = os.path.join(ROOT, "target", "bench")
PROGS = os.path.join(BENCH, "programs")
MB = 1 << 20
PERFETTO = "ptdec check (Perfetto's importer)"

# name, program, args, --repeat LOC, bytes of PT per extra iteration
# (measured; sets K for a size), per-cpu CPUs, threads that repeat
WORKLOADS = {
    "interp": ("interp", [], "interp_run", 4624, None, 1),
    "shapes": ("shapes", [], "shapes_round", 2173, None, 1),
    "interp2-percpu": ("interp", ["2"], "interp_run", 4770, 2, 2),
}
SIZES = [("10MB", 10), ("100MB", 100), ("1GB", 1024)]

# Real hardware: the project's own real recordings (../shared/realdata,
# see its README), their PT tiled to REAL_MB (ptbench-tile): each core's
# trace from its first PSB on, repeated, each copy's TSC packets and its
# core's context switches moved REAL_SHIFT later than the copy before, so
# that time goes on through the copies as in a longer recording and the
# switches still say whose code each copy is. name: (bundle under
# realdata, its cores). LLDB's multi-core bundle comes with its binary
# (modules/m.out); Skylake server 6/85: the decode meets missing code (the
# loader), a bad context and erratum SKZ84.
REAL = {
    "lldb-multicore": ("lldb/intelpt-multi-core-trace", ["45", "51"]),
}
REAL_MB = 30
# 8 << 31 TSC ticks: with the bundle's tscPerfZeroConversion (time_shift
# 31) exactly 8 * time_mult ns (8.6 s) of perf time, longer than the
# switch records span (4.6 s), so the copies' switches do not overlap.
REAL_SHIFT_TSC = 8 << 31
REALDATA = os.environ.get("PT_REALDATA", os.path.join(ROOT, "..", "shared", "realdata"))


def other_stacks(ncpu):
    """The row that builds the call stacks the other way than ptdec's
    default on `ncpu` CPUs (docs/decoding.md), and its environment."""
    if ncpu > 2:
        return "ptdec -j%d sequential stacks" % ncpu, "PTDEC_SEQUENTIAL_STACKS=1"
    return "ptdec -j%d stacks on the workers" % ncpu, "PTDEC_STACKS_AHEAD=1"


def jn_name(ncpu):
    return "ptdec -j%d" % ncpu


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def settle_output(argv, digests, keep):
    """Hashes the FTF a ptdec run wrote (`-o FILE`) into `digests` (path:
    (sha256, bytes)) and deletes it unless it is in `keep`: an FTF of a
    1 GB trace is about 20 GB, and six of them kept for the comparisons
    filled a 64 GB disk."""
    if "-o" in argv[:-1]:
        out = argv[argv.index("-o") + 1]
        # A Parquet dataset (a folder) stays for its size (`tree_bytes`).
        if os.path.isfile(out):
            digests[out] = (sha(out), os.path.getsize(out))
            if out not in keep:
                os.remove(out)


def run_child(argv, timeout, mem_limit, stdout=None, env=None):
    """Runs argv; returns dict(wall, cpu, rss_mb, status, out) from wait4.

    Standard output goes to /dev/null opened write-only, as a shell's
    `>/dev/null` opens it: subprocess.DEVNULL opens it read-write, which is
    what Rust's runtime puts on a closed fd 1, and ptdec refuses to write
    a report to a closed standard output."""
    if stdout is None:
        with open(os.devnull, "wb") as null:
            return run_child(argv, timeout, mem_limit, null, env)
    def limits():
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    start = time.monotonic()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE,
                         preexec_fn=limits, env=env)
    # A blocking wait, with a timer that kills at the timeout: polling
    # every 20 ms added 0-20 ms to every wall time.
    killed = threading.Event()
    def kill():
        killed.set()
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    wall = time.monotonic() - start
    timed_out = killed.is_set()
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if timed_out:
        state = "timeout"
    elif p.returncode == 0:
        state = "ok"
    elif p.returncode < 0 and mem_limit and ("memory" in err or p.returncode == -signal.SIGABRT):
        state = "oom"
    elif mem_limit and "memory allocation" in err:
        state = "oom"
    else:
        state = "failed (exit %d): %s" % (p.returncode, err.strip().splitlines()[-1:] or "")
    return {
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024.0,
        "state": state,
        "err": err,
    }


def remove_output(argv):
    """Removes the file a ptdec run is about to write (`-o FILE`), outside
    its timing: each run writes a new file, as perf script and bare libipt
    (which write none) delete nothing. Replacing the previous run's output
    cost 26 ms of wall time in `rename` on this VM, whose ext4 is mounted
    with `discard`: freeing the old file's blocks waits for the disk
    (do_renameat2 -> evict -> ext4_free_blocks -> blkdev_issue_discard in
    the sched_switch stacks); 6% of a `ptdec -j2` run on a 10 MB trace,
    paid by every ptdec row and by no other tool."""
    if "-o" in argv[:-1]:
        out = argv[argv.index("-o") + 1]
        if out != "-" and os.path.isfile(out):
            os.remove(out)
        elif "parquet" in argv and os.path.isdir(out):
            shutil.rmtree(out)


def tree_bytes(path):
    """The bytes of the files under `path` (a Parquet dataset)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def truth_totals(trace):
    """ptsim's truth: instructions and calls (None for a real trace)."""
    insns = calls = 0
    summary = os.path.join(trace, "truth", "summary.txt")
    if not os.path.exists(summary):
        return None, None
    with open(summary) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "total":
                insns = int(w[2])
                calls = int(w[7]) + int(w[8])
    return insns, calls


def generate(name, size_name, mb, args):
    prog, pargs, loc, per_iter, per_cpu, threads = WORKLOADS[name]
    k = max(1, int(mb * MB / per_iter / threads))
    trace = os.path.join(BENCH, "%s-%s" % (name, size_name))
    ptsim = os.path.join(REL, "ptsim")
    binary = os.path.join(PROGS, prog)
    cmd = [ptsim, "--empty-env", "-q", "-o", trace, "--repeat", "%s=%d" % (loc, k)]
    if per_cpu:
        cmd += ["--per-cpu", str(per_cpu)]
    cmd += ["--", binary] + pargs
    key = json.dumps([sha(ptsim), sha(binary), cmd[1:]])
    # Beside the trace, not in it: ptsim --force replaces only what looks
    # like a trace. target/bench/ is the bench's own: a stale trace goes.
    stamp = trace + ".bench-stamp.json"
    if os.path.exists(stamp) and open(stamp).read() == key and os.path.isdir(trace):
        return trace, None
    shutil.rmtree(trace, ignore_errors=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    print("bench: generating %s (%s --repeat %s=%d)" % (trace, prog, loc, k), file=sys.stderr, flush=True)
    r = run_child(cmd, 3600, None, stdout=subprocess.DEVNULL)
    if r["state"] != "ok":
        sys.exit("bench: ptsim failed for %s: %s\n%s" % (trace, r["state"], r["err"]))
    with open(stamp, "w") as f:
        f.write(key)
    return trace, r


# The real rows' `ptdec raw` of each core's trace (raw_script).
RAW_ROW = "ptdec raw, each core's trace, 1 core"

def raw_script(trace, out):
    """A shell command that decodes each core's trace of the LLDB bundle
    `trace` with `ptdec raw`, its module as `--elf` and its CPU as
    `--cpu`, into `out`."""
    with open(os.path.join(trace, "trace.json")) as f:
        bundle = json.load(f)
    cpu = bundle["cpuInfo"]
    module = bundle["processes"][0]["modules"][0]
    elf = "%s:%#x" % (os.path.join(trace, module["file"]), int(module["loadAddress"]))
    steps = []
    for c in bundle["cpus"]:
        steps.append(" ".join(shlex.quote(a) for a in [
            os.path.join(REL, "ptdec"), "raw", "-q", "--pt", os.path.join(trace, c["iptTrace"]),
            "--elf", elf, "--cpu", "%d/%d/%d" % (cpu["family"], cpu["model"], cpu["stepping"]),
            "-o", os.path.join(out, "raw-%s.ftf" % c["id"])]))
    return " && ".join(steps)

def tile_real(name):
    """The real recording `name` (REAL) as an LLDB bundle in target/bench/
    whose cores' traces are tiled to REAL_MB in all (kept until the
    recording changes); None when ../shared/realdata is not there."""
    bundle, cores = REAL[name]
    src = os.path.join(REALDATA, bundle)
    if not os.path.isfile(os.path.join(src, "trace.json")):
        print("bench: %s: %s is not there: no real-hardware row" % (name, src), file=sys.stderr)
        return None
    trace = os.path.join(BENCH, "%s-%dMB" % (name, REAL_MB))
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs)
    tiler = os.path.join(REL, "ptbench-tile")
    key = json.dumps([REAL_MB, REAL_SHIFT_TSC, cores, sha(tiler),
                      [(os.path.relpath(f, src), sha(f)) for f in files]])
    stamp = trace + ".bench-stamp.json"
    if os.path.exists(stamp) and open(stamp).read() == key and os.path.isdir(trace):
        return trace
    shutil.rmtree(trace, ignore_errors=True)
    shutil.copytree(src, trace)
    # realdata is read-only; the bench's copy is its own.
    for d, _, fs in os.walk(trace):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    with open(os.path.join(src, "trace.json")) as f:
        conv = json.load(f)["tscPerfZeroConversion"]
    if conv["timeShift"] > 31:
        sys.exit("bench: %s: time_shift %d: REAL_SHIFT_TSC is not a whole number of ns" % (src, conv["timeShift"]))
    shift_ns = (REAL_SHIFT_TSC >> conv["timeShift"]) * conv["timeMult"]
    psb = b"\x02\x82" * 8
    for core in cores:
        path = os.path.join(trace, "cores", "%s.intelpt_trace" % core)
        with open(path, "rb") as f:
            data = f.read()
        copies = -(-REAL_MB * MB // len(cores) // len(data[data.index(psb):]))
        r = subprocess.run([tiler, os.path.join(src, "cores", "%s.intelpt_trace" % core),
                            path, str(copies), str(REAL_SHIFT_TSC)], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("bench: ptbench-tile failed for %s: %s" % (path, r.stderr.strip()))
        first, last = (perf_time(int(x), conv) for x in r.stdout.split()[1:3])
        # The core's context switches (perf SWITCH_CPU_WIDE records with
        # TID | TIME: the time is each record's last 8 bytes) around the
        # trace's time span (two before it and two after: the recording's
        # switches span 4.6 s, its PT 71 us), once per copy.
        path = os.path.join(trace, "cores", "%s.perf_context_switch_trace" % core)
        recs = switch_records(path)
        times = [int.from_bytes(x[-8:], "little") for x in recs]
        lo = max([i for i, t in enumerate(times) if t <= first] or [0])
        hi = min([i for i, t in enumerate(times) if t >= last] or [len(recs) - 1])
        recs = recs[max(0, lo - 1):hi + 2]
        out = bytearray()
        for i in range(copies):
            for rec in recs:
                t = int.from_bytes(rec[-8:], "little")
                out += rec[:-8] + ((t + i * shift_ns) % (1 << 64)).to_bytes(8, "little")
        with open(path, "wb") as f:
            f.write(out)
    with open(stamp, "w") as f:
        f.write(key)
    print("bench: tiled %s to %s" % (src, trace), file=sys.stderr, flush=True)
    return trace


# --only sideband: (name, kind, MB of sideband, option)
SIDEBAND = [
    ("bundle, 20 MB switch file", "bundle", 20, None),
    ("bundle, 80 MB switch file", "bundle", 80, None),
    ("perf.data, 20 MB of switches", "perf", 20, "rounds"),
    ("perf.data, 20 MB of switches, no FINISHED_ROUND", "perf", 20, None),
    ("perf.data, 20 MB of MMAP2", "perf", 20, "mmaps"),
]


def switch_records(path):
    """An LLDB context-switch file's records (32 bytes each)."""
    with open(path, "rb") as f:
        b = f.read()
    out, pos = [], 0
    while pos + 8 <= len(b):
        size = int.from_bytes(b[pos + 6:pos + 8], "little")
        if size < 8 or pos + size > len(b):
            break
        out.append(b[pos:pos + size])
        pos += size
    return out


def grown_bundle(src, out, mb):
    """`src` with core 45's switches repeated to `mb` MB, each copy's
    times after the copy before's."""
    shutil.copytree(src, out)
    for d, _, fs in os.walk(out):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    path = os.path.join(out, "cores", "45.perf_context_switch_trace")
    recs = switch_records(path)
    times = [int.from_bytes(r[-8:], "little") for r in recs]
    span = max(times) - min(times) + 1000
    with open(path, "wb") as f:
        n, i = 0, 0
        while n + 32 * len(recs) <= mb * MB:
            for r in recs:
                f.write(r[:-8] + (int.from_bytes(r[-8:], "little") + i * span).to_bytes(8, "little"))
            n += 32 * len(recs)
            i += 1


def bundle_perf_data(src, out, mb, option):
    """LLDB's multi-core bundle `src` as a perf.data (the sideband ptdec
    makes of it: AUXTRACE_INFO, COMM, MMAP2, the cores' switches, their
    traces as AUXTRACE), with its switches (or as many MMAP2s) repeated
    to `mb` MB."""
    import struct
    with open(os.path.join(src, "trace.json")) as f:
        j = json.load(f)
    conv, proc = j["tscPerfZeroConversion"], j["processes"][0]
    pid, tids = proc["pid"], [t["tid"] for t in proc["threads"]]
    sample_type = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 16)  # TID TIME CPU IDENTIFIER

    def attr(kind, config, flags):
        return struct.pack("<IIQQQQQIIQQQQIiQIHHIIQ", kind, 128, config, 1, sample_type, 0, flags,
                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    def rec(kind, misc, body):
        return struct.pack("<IHH", kind, misc, 8 + len(body)) + body

    def trailer(p, t, time, cpu):
        return struct.pack("<IIQIIQ", p, t, time, cpu, 0, 2)

    def cstr(x):
        b = x.encode() + b"\0"
        return b + b"\0" * (-len(b) % 8)

    def mmap2(addr, length, ino, name, time, cpu):
        return rec(10, 2, struct.pack("<IIQQQIIQQII", pid, pid, addr, length, 0, 0, 0, ino, 0, 5, 2)
                   + cstr(name) + trailer(pid, pid, time, cpu))

    words = [8, conv["timeShift"], conv["timeMult"], conv["timeZero"], 1, 1 << 10, 0, 3, 0, 1] + [0] * 7
    data = bytearray(rec(70, 0, struct.pack("<II", 1, 0) + struct.pack("<%dQ" % len(words), *words)))
    for t in tids:
        data += rec(3, 0, struct.pack("<II", pid, t) + cstr("m.out") + trailer(pid, t, 0, 0))
    data += mmap2(0x400000, 0x16000, 0, os.path.join(src, "modules", "m.out"), 0, 0)
    sw = []
    for core in (45, 51):
        for r in switch_records(os.path.join(src, "cores", "%d.perf_context_switch_trace" % core)):
            misc = struct.unpack("<H", r[4:6])[0]
            npid, ntid, spid, stid, t = struct.unpack("<IIIIQ", r[8:32])
            sw.append((t, core, misc, npid, ntid, spid, stid))
    sw.sort()
    span = sw[-1][0] - sw[0][0] + 1000
    start, i, n = len(data), 0, 0
    while len(data) - start < mb * MB:
        for (t, core, misc, npid, ntid, spid, stid) in sw:
            t += i * span
            if option == "mmaps":
                data += mmap2(0x10000000 + n % 4096 * 0x1000, 0x1000, n, "/lib/x%d.so" % (n % 64), t, core)
            else:
                data += rec(15, misc, struct.pack("<II", npid, ntid) + trailer(spid, stid, t, core))
            n += 1
            if option in ("rounds", "mmaps") and n % 1000 == 0:
                data += rec(68, 0, b"")
        i += 1
    for idx, core in enumerate((45, 51)):
        with open(os.path.join(src, "cores", "%d.intelpt_trace" % core), "rb") as f:
            pt = f.read()
        pt += b"\0" * (-len(pt) % 8)
        data += struct.pack("<IHH", 71, 0, 48) + struct.pack("<QQQIIII", len(pt), 0, 0, idx, 0xFFFFFFFF, core, 0)
        data += pt
    ids = 104 + 2 * 144
    attrs = (attr(8, 1 | (1 << 13) | (1 << 10), (1 << 18) | (1 << 5) | (1 << 6)) + struct.pack("<QQ", ids, 8)
             + attr(1, 9, (1 << 18) | (1 << 23) | (1 << 9) | (1 << 13) | (1 << 26) | (1 << 5))
             + struct.pack("<QQ", ids + 8, 8))
    data_off = ids + 16
    table = data_off + len(data)
    header = struct.pack("<QQQQQQQQQQQQQ", 0x32454C4946524550, 104, 144, 104, 2 * 144, data_off, len(data),
                         0, 0, 1 << 18, 0, 0, 0)  # one feature: the (empty) AUXTRACE index
    with open(out, "wb") as f:
        f.write(header + attrs + struct.pack("<QQ", 1, 2) + data + struct.pack("<QQQ", table + 16, 8, 0))


def sideband_bench(args):
    """--only sideband: `ptdec info`'s peak RSS on large sidebands."""
    src = os.path.join(REALDATA, "lldb", "intelpt-multi-core-trace")
    if not os.path.isfile(os.path.join(src, "trace.json")):
        print("bench: %s is not there: no sideband rows" % src, file=sys.stderr)
        return
    root = os.path.join(BENCH, "sideband")
    key = json.dumps([SIDEBAND, sha(os.path.abspath(__file__)), sha(os.path.join(src, "trace.json"))])
    stamp = root + ".bench-stamp.json"
    if not (os.path.exists(stamp) and open(stamp).read() == key):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        for i, (_, kind, mb, option) in enumerate(SIDEBAND):
            out = os.path.join(root, str(i))
            if kind == "bundle":
                grown_bundle(src, out, mb)
            else:
                bundle_perf_data(src, out + ".data", mb, option)
        with open(stamp, "w") as f:
            f.write(key)
    print()
    print("| input | sideband MB | tool | wall s | peak RSS MB | RSS / sideband |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for i, (name, kind, mb, _) in enumerate(SIDEBAND):
        trace = os.path.join(root, str(i) + ("" if kind == "bundle" else ".data"))
        argv = [os.path.join(REL, "ptdec"), "info", trace]
        runs = [run_child(argv, args.timeout, None) for _ in range(args.runs)]
        ok = [r for r in runs if r["state"] == "ok"]
        if len(ok) != len(runs):
            print("| %s | %d | ptdec info | %s | | |" % (name, mb, runs[-1]["state"]))
            continue
        rss = statistics.median(r["rss_mb"] for r in ok)
        print("| %s | %d | ptdec info | %s | %.0f | %.2f |" % (
            name, mb, fmt(statistics.median(r["wall"] for r in ok)), rss, rss / mb))


def perf_time(tsc, conv):
    """perf time of `tsc` by an LLDB bundle's tscPerfZeroConversion (as
    perf's tsc_to_perf_time)."""
    shift, mult = conv["timeShift"], conv["timeMult"]
    quot, rem = tsc >> shift, tsc & ((1 << shift) - 1)
    return (conv["timeZero"] + quot * mult + ((rem * mult) >> shift)) % (1 << 64)


def pt_bytes(trace):
    """Bytes of PT in a trace dir, or in an LLDB bundle's cores."""
    data = os.path.join(trace, "data")
    if os.path.exists(data):
        return os.path.getsize(data)
    cores = os.path.join(trace, "cores")
    return sum(os.path.getsize(os.path.join(cores, f)) for f in os.listdir(cores) if f.endswith(".intelpt_trace"))


def fallbacks(trace, env):
    """What `ptdec report --decoder fast` says of the chunks it handed to
    libipt (its summary's flow decoder line)."""
    # /dev/null opened write-only, as run_child opens it (ptdec refuses a
    # standard output opened read-write, as a closed one looks).
    with open(os.devnull, "wb") as null:
        r = subprocess.run([os.path.join(REL, "ptdec"), "report", trace, "--decoder", "fast", "-j1"],
                           stdout=null, stderr=subprocess.PIPE, text=True, env=env)
    for line in r.stderr.splitlines():
        if line.strip().startswith("flow decoder"):
            return line.strip()[len("flow decoder"):].strip()
    return "no summary (exit %d)" % r.returncode


def out_dir(args, pt_mb):
    """Where a trace's outputs go, and whether that folder is removed after
    it (the module doc says why a tmpfs): `--out-dir`, else a new folder
    of its own in /dev/shm (`tempfile.mkdtemp`: not one an earlier run or
    another user left) when that has room for twice 200 times the PT,
    else target/bench. Folders a killed bench left in /dev/shm are removed
    first (their PID no longer runs)."""
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        return args.out_dir, False
    try:
        for old in os.listdir("/dev/shm"):
            pid = old[len("ptbench-"):].split("-")[0] if old.startswith("ptbench-") else ""
            if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
                path = os.path.join("/dev/shm", old)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
        st = os.statvfs("/dev/shm")
        room = st.f_bavail * st.f_frsize
        if room > 2 * 200 * pt_mb * MB:
            d = tempfile.mkdtemp(prefix="ptbench-%d-" % os.getpid(), dir="/dev/shm")
            # Also when the bench is interrupted: it holds memory (SIGTERM
            # and SIGHUP exit through SystemExit, so atexit runs then too).
            atexit.register(shutil.rmtree, d, True)
            return d, True
    except OSError as e:
        print("bench: /dev/shm not used (%s); outputs in %s" % (e, BENCH), file=sys.stderr)
    return BENCH, False


def fmt(x, digits=2):
    return ("%." + str(digits) + "f") % x if x is not None else "–"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 1 GB traces")
    ap.add_argument("--runs", type=int, default=3, help="runs per cell (1 GB traces: 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child")
    ap.add_argument("--mem-gb", type=float, default=None,
                    help="memory budget per child (default: half of MemAvailable)")
    ap.add_argument("--only", default=None, help="comma-separated workloads")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated trace sizes (10MB, 100MB, 1GB; default: all)")
    ap.add_argument("--perf", default=os.environ.get("PT_PERF", "perf"))
    ap.add_argument("--out-dir", default=None,
                    help="where ptdec's outputs go (default: a folder in /dev/shm when it has room, "
                         "else target/bench)")
    args = ap.parse_args()
    # SIGTERM and SIGHUP end the bench through SystemExit, so that its
    # atexit handlers remove the outputs it keeps in /dev/shm.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))

    avail = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    budget = int(args.mem_gb * (1 << 30)) if args.mem_gb else avail // 2
    ncpu = os.cpu_count() or 1
    os.makedirs(BENCH, exist_ok=True)
    home = os.path.join(BENCH, "perf-home")

    sizes = [s for s in SIZES if not (args.quick and s[1] >= 1024)]
    if args.sizes:
        wanted = args.sizes.split(",")
        unknown = [w for w in wanted if w not in [s[0] for s in SIZES]]
        if unknown:
            ap.error("unknown size %s (known: %s)" % (", ".join(unknown), ", ".join(s[0] for s in SIZES)))
        sizes = [s for s in sizes if s[0] in wanted]
    names = args.only.split(",") if args.only else list(WORKLOADS) + list(REAL)
    if "sideband" in names:
        sideband_bench(args)
        names.remove("sideband")
        if not names:
            return
    unknown = [n for n in names if n not in WORKLOADS and n not in REAL]
    if unknown:
        ap.error("unknown workload %s (known: %s)" % (", ".join(unknown), ", ".join(list(WORKLOADS) + list(REAL))))
    traces = []
    for name in names:
        if name in REAL:
            trace = tile_real(name)
            if trace:
                traces.append((name, "%dMB" % REAL_MB, REAL_MB, trace, None))
            continue
        for size_name, mb in sizes:
            if name == "interp2-percpu" and mb != 100:
                continue  # the per-cpu trace: one size
            trace, gen = generate(name, size_name, mb, args)
            traces.append((name, size_name, mb, trace, gen))

    rows = []
    rss_by_tool = {}
    checks = []
    for name, size_name, mb, trace, gen in traces:
        pt_mb = pt_bytes(trace) / MB
        out, temporary = out_dir(args, pt_mb)
        checks.append((name, size_name, "outputs", "in %s" % out))
        ftf = os.path.join(out, "out.ftf")
        insns, calls = truth_totals(trace)
        real = name in REAL
        runs = 1 if mb >= 1024 else args.runs
        # perf's build-id cache with the trace's vDSO (as perf record fills it)
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([sys.executable, "-c", PERF_HOME, trace, home], check=True)
        env = dict(os.environ, HOME=home, PAGER="cat")
        ftfs = {j: os.path.join(out, "out-j%d.ftf" % j) for j in (1, ncpu, 8)}
        ftf_lib = os.path.join(out, "out-libipt.ftf")
        ftf_fast = os.path.join(out, "out-fast.ftf")
        ftf_seq = os.path.join(out, "out-seq.ftf")
        pq_one = os.path.join(out, "out-parquet-1core")
        pq_jn = os.path.join(out, "out-parquet-jn")
        alt, alt_env = other_stacks(ncpu)
        tools = [
            ("ptdec -j1", [os.path.join(REL, "ptdec"), trace, "-q", "-j1", "-o", ftfs[1]], True),
            # Everything on one core (the stages are threads of their own):
            # what a core costs, against which the all-cores row is a
            # speed-up.
            ("ptdec 1 core", ["taskset", "-c", "0", os.path.join(REL, "ptdec"), trace, "-q", "-o", ftf], True),
            ("ptdec -j%d" % ncpu, [os.path.join(REL, "ptdec"), trace, "-q", "-o", ftfs[ncpu]], True),
            ("ptdec -j8", [os.path.join(REL, "ptdec"), trace, "-q", "-j8", "-o", ftfs[8]], True),
            # The same decode as a Parquet dataset (issue 46): no more CPU
            # than FTF on one core and on all, at most 12 bytes per call.
            ("ptdec parquet 1 core", ["taskset", "-c", "0", os.path.join(REL, "ptdec"), trace, "-q",
                                      "--format", "parquet", "--trace-name", "bench", "-o", pq_one], True),
            ("ptdec parquet -j%d" % ncpu, [os.path.join(REL, "ptdec"), trace, "-q",
                                           "--format", "parquet", "--trace-name", "bench", "-o", pq_jn], True),
            # The call stacks built the other way than the default here
            # (docs/decoding.md: on the decode workers with more than 2
            # CPUs, on the output thread with 2 or fewer): the same FTF,
            # and what each way gains.
            (alt, ["env", alt_env, os.path.join(REL, "ptdec"), trace, "-q", "-o", ftf_seq], True),
            # The same decode aggregated instead of encoded: no more CPU
            # than FTF, memory flat (issue 22).
            ("ptdec report -j1", [os.path.join(REL, "ptdec"), "report", trace, "-q", "-j1", "--slowest", "10"], True),
            # The two flow decoders (issue 23): the same FTF, ptdec's own
            # faster; report -j1 with the fast one should cost no more CPU
            # than bare libipt.
            ("ptdec --decoder libipt -j1", [os.path.join(REL, "ptdec"), trace, "-q", "-j1", "--decoder", "libipt", "-o", ftf_lib], True),
            ("ptdec --decoder fast -j1", [os.path.join(REL, "ptdec"), trace, "-q", "-j1", "--decoder", "fast", "-o", ftf_fast], True),
            # On one core, as bare libipt runs (with -j1 alone the call
            # stacks run on the other core, and the ops cross between them).
            ("ptdec report --decoder fast, 1 core", ["taskset", "-c", "0", os.path.join(REL, "ptdec"), "report", trace, "-q", "--decoder", "fast", "--slowest", "10"], True),
            # The same without the slowest calls (`ptdec report`'s
            # default): what `--slowest 10` costs shows between the two.
            ("ptdec report --decoder fast, 1 core, no --slowest", ["taskset", "-c", "0", os.path.join(REL, "ptdec"), "report", trace, "-q", "--decoder", "fast"], True),
            # The report on every core (issue 47: at most 0.55 x one
            # core's wall time on two).
            ("ptdec report -j%d, no --slowest" % ncpu, [os.path.join(REL, "ptdec"), "report", trace, "-q"], True),
            ("perf script", [args.perf, "script", "-i", trace, "--itrace=cr"], False),
            # On the core of the one-core rows they are compared with.
            ("bare libipt", ["taskset", "-c", "0", os.path.join(REL, "ptbench-libipt"), trace], False),
            ("bare fast", ["taskset", "-c", "0", os.path.join(REL, "ptbench-fast"), trace], False),
            # The flow decoder handing out walks, as ptdec's chunk
            # decoder takes its blocks (`ptflow::walk`).
            ("bare fast, walks", ["env", "PTBENCH_WALKS=1", "taskset", "-c", "0", os.path.join(REL, "ptbench-fast"), trace], False),
        ]
        if real:
            # A real recording (an LLDB bundle, which perf does not
            # read): the decoders alone, FTF and report on one core, and
            # both flow decoders' FTF (the same bytes).
            keep = {"ptdec 1 core", "ptdec --decoder libipt -j1", "ptdec --decoder fast -j1",
                    "ptdec report --decoder fast, 1 core, no --slowest", "bare libipt", "bare fast",
                    "bare fast, walks"}
            tools = [t for t in tools if t[0] in keep]
            # Its cores' traces as raw PT (`ptdec raw`, as LLDB's,
            # simple-pt's or kAFL's trace files are decoded), one after
            # the other on one core: the same bytes as the bundle's, with
            # no context switches (each core's trace one thread).
            tools.append((RAW_ROW, ["taskset", "-c", "0", "sh", "-c", raw_script(trace, out)], True))
        seen = set()
        tools = [t for t in tools if not (t[0] in seen or seen.add(t[0]))]
        res = {}
        # Which tools run, and under which address-space limit.
        active = []
        for tool, argv, grows in tools:
            key = tool.split()[0] + (" -j1" if tool.endswith("-j1") else "")
            # perf keeps nothing per op; ptdec's memory is bounded by its
            # window (the address-space limit below still guards it). A
            # tool whose RSS grew with the trace would be skipped here.
            est = None
            ratio = rss_by_tool.get((name, key))
            if grows and ratio and not tool.startswith("ptdec"):
                est = ratio * pt_mb * MB
            if est and est > budget:
                res[tool] = {"state": "skipped: would exceed memory (est. %.0f GB > budget %.0f GB)" % (est / (1 << 30), budget / (1 << 30))}
                print("bench: %s %s %s: %s" % (name, size_name, tool, res[tool]["state"]), file=sys.stderr, flush=True)
                continue
            limit = budget + 2 * int(pt_mb * MB) + (2 << 30) if grows else None
            active.append((tool, argv, key, limit))
        # Round by round, every tool once per round: a host that is busier
        # for a while slows every tool alike, where runs of one tool after
        # another put the busy time into some cells only (the ratios
        # between cells moved by 5-8 % from one bench run to the next).
        samples = {tool: [] for tool, _, _, _ in active}
        digests = {}
        for r in range(runs):
            for tool, argv, _, limit in active:
                if samples[tool] and samples[tool][-1]["state"] != "ok":
                    continue
                remove_output(argv)
                # The FTFs written before (up to 20 GB) go to the disk
                # now, not during this run.
                os.sync()
                samples[tool].append(run_child(argv, args.timeout, limit, env=env))
                if r == runs - 1:
                    settle_output(argv, digests, keep={ftfs[ncpu]})
        for tool, argv, key, limit in active:
            ok = [s for s in samples[tool] if s["state"] == "ok"]
            if len(ok) == len(samples[tool]):
                cell = {
                    "state": "ok",
                    "wall": statistics.median(s["wall"] for s in ok),
                    "cpu": statistics.median(s["cpu"] for s in ok),
                    "rss_mb": statistics.median(s["rss_mb"] for s in ok),
                    "runs": len(ok),
                }
                rss_by_tool.setdefault((name, key), cell["rss_mb"] * MB / (pt_mb * MB))
            else:
                bad = samples[tool][-1]
                state = bad["state"]
                if state == "timeout":
                    state = "timeout (> %.0f s)" % args.timeout
                elif state == "oom":
                    state = "out of memory (limit %.0f GB)" % (limit / (1 << 30))
                cell = {"state": state}
            res[tool] = cell
            print("bench: %s %s %s: %s" % (name, size_name, tool,
                  cell["state"] if cell["state"] != "ok" else "%.2f s wall, %.2f s CPU, %.0f MB" % (cell["wall"], cell["cpu"], cell["rss_mb"])),
                  file=sys.stderr, flush=True)
        for tool, _, _ in tools:
            if tool in res:
                rows.append((name, size_name, pt_mb, insns, calls, tool, res[tool]))
        # What users will see: the last FTF ptdec wrote, loaded into
        # Perfetto's importer (`ptdec check`). Skipped for FTFs over 2 GB
        # (trace_processor holds the whole trace in memory).
        # The same FTF bytes whatever -j is.
        done = [j for j in sorted(ftfs) if res.get("ptdec -j%d" % j, {}).get("state") == "ok"]
        if len(done) > 1:
            same = len({digests[ftfs[j]][0] for j in done}) == 1
            checks.append((name, size_name, "ptdec's FTF of %s" % ", ".join("-j%d" % j for j in done), "%s" % (
                "byte-identical" if same else "DIFFERENT")))
        seq, _ = other_stacks(ncpu)
        if res.get(seq, {}).get("state") == "ok" and done:
            same = digests[ftf_seq][0] == digests[ftfs[done[0]]][0]
            checks.append((name, size_name, "ptdec's FTF with sequential stacks and built on the workers",
                           "byte-identical" if same else "DIFFERENT"))
        flows = [("libipt", ftf_lib), ("fast", ftf_fast)]
        if all(res.get("ptdec --decoder %s -j1" % d, {}).get("state") == "ok" for d, _ in flows):
            same = digests[ftf_lib][0] == digests[ftf_fast][0]
            checks.append((name, size_name, "ptdec's FTF of --decoder libipt and fast",
                           "byte-identical" if same else "DIFFERENT"))
        if res.get(jn_name(ncpu), {}).get("state") == "ok" and os.path.exists(ftfs[ncpu]):
            os.replace(ftfs[ncpu], ftf)
            tp = os.environ.get("PT_TRACE_PROCESSOR")
            if not tp:
                checks.append((name, size_name, PERFETTO, "not run: PT_TRACE_PROCESSOR does not name a trace_processor_shell"))
            elif os.path.getsize(ftf) > 2 * (1 << 30):
                checks.append((name, size_name, PERFETTO, "not run: the FTF is over 2 GB"))
            else:
                r = subprocess.run([os.path.join(REL, "ptdec"), "check", "--trace-processor", tp, ftf],
                                   capture_output=True, text=True, timeout=args.timeout)
                lines = (r.stdout + r.stderr).strip().splitlines()
                checks.append((name, size_name, PERFETTO, ("ok: " if r.returncode == 0 else "FAILED: ") + " / ".join(lines[-3:])))
            print("bench: %s %s perfetto: %s" % (name, size_name, checks[-1][3]), file=sys.stderr, flush=True)
        # A 10 ms window from the middle of the trace (--start @NS
        # --duration 10ms): the cost should follow the window, not the trace.
        info = subprocess.run([os.path.join(REL, "ptdec"), "info", trace], capture_output=True, text=True)
        span = None
        for line in info.stdout.splitlines():
            parts = line.split()
            if parts[:3] == ["time", "perf", "time"] and len(parts) >= 6:
                span = (int(parts[3]), int(parts[5]))
        if span and res.get("ptdec -j1", {}).get("state") == "ok":
            mid = (span[0] + span[1]) // 2
            wargv = [os.path.join(REL, "ptdec"), trace, "-q", "--start", "@%d" % mid, "--duration", "10ms", "-o", ftf]
            # Always --runs samples (each well under a second): the one run
            # after the full decodes of interp 1 GB once took 4.6 s wall for
            # 1.9 s CPU, and 0.4 s when run again.
            samples = []
            for _ in range(args.runs):
                remove_output(wargv)
                samples.append(run_child(wargv, args.timeout, None, env=env))
            ok = [x for x in samples if x["state"] == "ok"]
            if len(ok) == len(samples):
                cell = {"state": "ok", "wall": statistics.median(x["wall"] for x in ok),
                        "cpu": statistics.median(x["cpu"] for x in ok),
                        "rss_mb": statistics.median(x["rss_mb"] for x in ok), "runs": len(ok),
                        "ratio": "10 ms window from the middle"}
            else:
                cell = {"state": samples[-1]["state"]}
            res["ptdec window"] = cell
            rows.append((name, size_name, pt_mb, insns, calls, "ptdec 10 ms window", cell))
            print("bench: %s %s ptdec 10 ms window: %s" % (name, size_name,
                  cell["state"] if cell["state"] != "ok" else "%.2f s wall, %.0f MB" % (cell["wall"], cell["rss_mb"])),
                  file=sys.stderr, flush=True)
        # ratios on the ptdec rows
        def cpu(t):
            c = res.get(t, {})
            return c.get("cpu") if c.get("state") == "ok" else None
        def wall(t):
            c = res.get(t, {})
            return c.get("wall") if c.get("state") == "ok" else None
        j1, jn, one = "ptdec -j1", "ptdec -j%d" % ncpu, "ptdec 1 core"
        def ratio(a, b):
            return fmt(a / b) if a and b else "–"
        per_call = "–"
        if res.get(j1, {}).get("state") == "ok" and calls:
            per_call = "%.1f" % (digests[ftfs[1]][1] / calls)
        if j1 in res:
            res[j1]["ratio"] = "CPU: %s x perf, %s x libipt; wall: %s x perf, %s x libipt; FTF %s B/call" % (
                ratio(cpu(j1), cpu("perf script")), ratio(cpu(j1), cpu("bare libipt")),
                ratio(wall(j1), wall("perf script")), ratio(wall(j1), wall("bare libipt")), per_call)
        if one in res:
            res[one]["ratio"] = "CPU: %s x libipt (target <= 0.6)" % ratio(cpu(one), cpu("bare libipt"))
        if jn in res:
            res[jn]["ratio"] = "wall: %s x -j1, %s x 1 core (target <= 0.55)" % (
                ratio(wall(jn), wall(j1)), ratio(wall(jn), wall(one)))
        seq, _ = other_stacks(ncpu)
        if seq in res:
            res[seq]["ratio"] = "wall: %s x 1 core; -j%d (stacks %s) is %s x this" % (
                ratio(wall(seq), wall(one)), ncpu,
                "on the workers" if ncpu > 2 else "on the output thread", ratio(wall(jn), wall(seq)))
        pq1, pqn = "ptdec parquet 1 core", "ptdec parquet -j%d" % ncpu
        if pq1 in res and res[pq1].get("state") == "ok" and calls:
            per = tree_bytes(pq_one) / calls
            ftf_per = digests[ftfs[1]][1] / calls if ftfs[1] in digests else None
            res[pq1]["ratio"] = "CPU: %s x FTF 1 core (target <= 1); %.1f B/call (target <= 12; FTF %s)" % (
                ratio(cpu(pq1), cpu(one)), per, fmt(ftf_per, 1))
        if pqn in res:
            res[pqn]["ratio"] = "CPU: %s x FTF -j%d (target <= 1); wall: %s x parquet 1 core" % (
                ratio(cpu(pqn), cpu(jn)), ncpu, ratio(wall(pqn), wall(pq1)))
        if "ptdec -j8" in res and ncpu != 8:
            res["ptdec -j8"]["ratio"] = "wall: %s x -j%d" % (ratio(wall("ptdec -j8"), wall(jn)), ncpu)
        fast, lib = "ptdec --decoder fast -j1", "ptdec --decoder libipt -j1"
        if fast in res:
            res[fast]["ratio"] = "CPU: %s x --decoder libipt, %s x bare libipt" % (
                ratio(cpu(fast), cpu(lib)), ratio(cpu(fast), cpu("bare libipt")))
        rep_one = "ptdec report --decoder fast, 1 core"
        if rep_one in res:
            res[rep_one]["ratio"] = "CPU: %s x bare libipt (target <= 0.33)" % (
                ratio(cpu(rep_one), cpu("bare libipt")))
        rep_plain = rep_one + ", no --slowest"
        if rep_plain in res:
            res[rep_plain]["ratio"] = "CPU: %s x bare libipt (target <= 0.33)" % (
                ratio(cpu(rep_plain), cpu("bare libipt")))
            # Rows without the --slowest run (the real row) say nothing of it.
            if cpu(rep_one):
                res[rep_plain]["ratio"] += "; --slowest 10 costs %s x this" % ratio(cpu(rep_one), cpu(rep_plain))
        rep_jn = "ptdec report -j%d, no --slowest" % ncpu
        if rep_jn in res:
            res[rep_jn]["ratio"] = "wall: %s x 1 core (target <= 0.55)" % (
                ratio(wall(rep_jn), wall(rep_plain)))
        if "bare fast" in res:
            res["bare fast"]["ratio"] = "speed: %s x bare libipt (target >= 8)" % (
                ratio(cpu("bare libipt"), cpu("bare fast")))
        if "bare fast, walks" in res:
            res["bare fast, walks"]["ratio"] = "speed: %s x bare libipt (target >= 8)" % (
                ratio(cpu("bare libipt"), cpu("bare fast, walks")))
        if real:
            if one in res:
                res[one]["ratio"] = "CPU: %s x bare libipt (FTF, 1 core)" % ratio(cpu(one), cpu("bare libipt"))
            if RAW_ROW in res:
                res[RAW_ROW]["ratio"] = "CPU: %s x bare libipt (FTF of each core's trace, no context switches)" % (
                    ratio(cpu(RAW_ROW), cpu("bare libipt")))
            # The target on real rows: no chunk handed to libipt.
            checks.append((name, size_name, "chunks of `ptdec report --decoder fast`", fallbacks(trace, env)))
        if "ptdec report -j1" in res:
            res["ptdec report -j1"]["ratio"] = "CPU: %s x ptdec -j1 (FTF)" % (
                fmt(cpu("ptdec report -j1") / cpu(j1)) if cpu("ptdec report -j1") and cpu(j1) else "–")
        if temporary:
            shutil.rmtree(out, ignore_errors=True)

    print()
    print("| trace | PT MB | instructions | calls | tool | wall s | CPU s | peak RSS MB | MB/s | M insn/s | ratio |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, size_name, pt_mb, insns, calls, tool, c in rows:
        head = "| %s %s | %.0f | %s | %s | %s |" % (name, size_name, pt_mb, "–" if insns is None else insns,
                                                 "–" if calls is None else calls, tool)
        if c["state"] != "ok":
            print("%s %s | | | | | |" % (head, c["state"]))
            continue
        print("%s %s | %s | %.0f | %s | %s | %s |" % (
            head, fmt(c["wall"]), fmt(c["cpu"]), c["rss_mb"],
            fmt(pt_mb / c["wall"], 1), fmt(insns / 1e6 / c["wall"] if insns else None, 1), c.get("ratio", "")))
    print()
    # peak RSS at 1 GB over peak RSS at 10 MB, per workload and tool
    for name in names:
        for tool in ["ptdec -j1", "ptdec 1 core", "ptdec -j%d" % ncpu, "ptdec report -j1", "perf script", "bare libipt"]:
            small = [c for (n, s, _, _, _, t, c) in rows if n == name and s == "10MB" and t == tool]
            big = [c for (n, s, _, _, _, t, c) in rows if n == name and s == "1GB" and t == tool]
            if small and big:
                if small[0]["state"] == "ok" and big[0]["state"] == "ok":
                    print("peak RSS 1GB/10MB %s %s: %.1f" % (name, tool, big[0]["rss_mb"] / small[0]["rss_mb"]))
                else:
                    print("peak RSS 1GB/10MB %s %s: – (1GB: %s)" % (name, tool, big[0]["state"]))
    for name, size_name, what, state in checks:
        print("%s %s: %s: %s" % (name, size_name, what, state))
    print("runs per cell: median of %d (1 GB traces: 1); %d CPUs; memory budget %.0f GB" % (args.runs, ncpu, budget / (1 << 30)))
    for name, size_name, mb, trace, gen in traces:
        if gen:
            print("generated %s %s: %.1f s wall, %.1f s CPU, %.0f MB peak RSS" % (name, size_name, gen["wall"], gen["cpu"], gen["rss_mb"]))


PERF_HOME = r"""
import os, shutil, sys
trace, home = sys.argv[1], sys.argv[2]
img = os.path.join(trace, "images")
for f in os.listdir(img) if os.path.isdir(img) else []:
    if not (f.startswith("vdso-") and f.endswith(".so")):
        continue
    bid = f[5:-3]
    d = os.path.join(home, ".debug", "[vdso]", bid)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(img, f), os.path.join(d, "vdso"))
    link = os.path.join(home, ".debug", ".build-id", bid[:2])
    os.makedirs(link, exist_ok=True)
    os.symlink("../../[vdso]/" + bid, os.path.join(link, bid[2:]))
"""

if __name__ == "__main__":
    main()
