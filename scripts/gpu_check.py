#!/usr/bin/env python3
"""Every GPU figure of docs/BENCHMARKS.md from one call (issue 37), run by scripts/gpu-check.sh.

Phases, in order of importance, each written to the output folder as soon as it ends (so a call
cut short still returns what it measured):

  selftest      `dptrain selftest` on each dptrain device (the kernels and one DP step against
                their CPU references), with its wall time (a cold start: kernels compile)
  side-by-side  median ms per step of interleaved rounds: PyTorch plain, Opacus hooks and ghost
                (when torch and opacus import), dptrain none and gaussian on each device
  cold-start    wall time of a one-lot `dptrain bench` with empty caches, then again with the
                caches the first left (CubeCL's autotune and compiled kernels, the driver's shaders)
  main-job      the README's main job (scripts/demo.sh's `dptrain train`) on the first device:
                wall time, test accuracy and the epsilon with its label
  kernels       CubeCL's profiler over DP-SGD lots on the first device: the kernels that take
                the time, per lot

Writes gpu-check.json (everything), gpu-check.md (the tables) and log.txt. With --dry-run the same
steps run on this machine: dptrain on wgpu (Mesa's lavapipe where there is no GPU) and PyTorch on the
CPU where torch is installed (its rows say "absent" otherwise), on the CPU's workload shapes.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side  # noqa: E402

PHASES = ("selftest", "side-by-side", "cold-start", "main-job", "kernels", "step-phases")
# scripts/demo.sh's training command (the README's main job), without its device.
MAIN_JOB = ["train", "--model", "scatnet-linear", "--epochs", "40", "--lot-size", "8192", "--target-epsilon", "3",
            "--delta", "1e-5", "--accountant", "prv", "--learning-rate", "16", "--momentum", "0.9",
            "--clip-norm", "0.1", "--ema", "0.999"]
# CubeCL's profiler line: "| 12.345µs   | kernel name".
PROFILED = re.compile(r"^\| (\d+(?:\.\d+)?)(ns|µs|us|ms|s)\s*\| (.+)$")
UNIT_MS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}


class Check:
    """The run's state: options, results so far, the log, and the deadline."""

    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.results = {"phases": {}, "skipped": {}}
        os.makedirs(args.out, exist_ok=True)
        self.log_file = open(os.path.join(args.out, "log.txt"), "a", buffering=1)
        self.work = tempfile.mkdtemp(prefix="gpu-check-")
        # The machine's caches (a GPU machine starts bare); the cold start and the main job use
        # empty ones of their own.
        self.env = dict(os.environ)

    def log(self, line):
        stamp = f"[{time.monotonic() - self.started:6.1f} s] {line}"
        print(stamp, file=sys.stderr, flush=True)
        self.log_file.write(stamp + "\n")

    def left(self):
        return self.args.deadline - (time.monotonic() - self.started)

    def dptrain(self, args, env=None, cwd=None, timeout=None):
        """Runs dptrain; (seconds, CompletedProcess)."""
        start = time.monotonic()
        self.log("dptrain " + " ".join(args))
        run = subprocess.run([self.args.dptrain, *args], capture_output=True, text=True, env=env or self.env,
                             cwd=cwd, timeout=timeout or max(self.left(), 1))
        seconds = time.monotonic() - start
        if run.stderr.strip():
            self.log_file.write(run.stderr[-4000:] + "\n")
        self.log(f"  exit {run.returncode} after {seconds:.1f} s")
        return seconds, run

    def usable(self):
        """The devices the benchmarks run on: those whose self-test passed (a device that cannot
        open, or fails a check, is refused by dptrain), all of them when the self-test did not run."""
        tested = self.results["phases"].get("selftest", {})
        return [d for d in self.args.devices if d not in tested or tested[d].get("exit") == 0]

    def save(self):
        self.results["seconds"] = round(time.monotonic() - self.started, 1)
        with open(os.path.join(self.args.out, "gpu-check.json"), "w") as f:
            json.dump(self.results, f, indent=1)
        with open(os.path.join(self.args.out, "gpu-check.md"), "w") as f:
            f.write(markdown(self.results))


def environment(c):
    """What ran where: the GPU, driver, CPU, dptrain, torch."""
    info = {"cpu": side_by_side.cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "dry_run": c.args.dry_run, "devices": c.args.devices}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        info["gpu"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["gpu"] = f"no nvidia-smi ({e.__class__.__name__})"
    info["vulkan"] = vulkan_drivers()
    _, version = c.dptrain(["--version"])
    info["dptrain"] = version.stdout.strip()
    torch, opacus = side_by_side.import_torch()
    info["torch"] = f"torch {torch.__version__}, opacus {opacus.__version__}" if torch else "absent"
    if torch is not None and c.args.torch_device == "cuda":
        info["torch_cuda"] = f"{torch.version.cuda} on {torch.cuda.get_device_name(0)}"
    return info


def vulkan_drivers():
    """The Vulkan drivers the loader can find, and the libraries each lacks (why wgpu may see no
    adapter on a machine whose GPU works)."""
    found = []
    folders = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/nvidia/share/vulkan/icd.d"]
    listed = [f for f in os.environ.get("VK_DRIVER_FILES", os.environ.get("VK_ICD_FILENAMES", "")).split(":") if f]
    scanned = [os.path.join(d, f) for d in folders if os.path.isdir(d) for f in sorted(os.listdir(d))]
    try:  # where the dynamic loader finds a library named bare
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
    except OSError:
        cache = []
    for path in dict.fromkeys(listed + scanned):  # each manifest once, the environment's first
        try:
            library = json.load(open(path))["ICD"]["library_path"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            found.append(f"{path}: unreadable ({e.__class__.__name__})")
            continue
        if not os.path.isabs(library):
            hits = [line.split(" => ")[-1].strip() for line in cache if line.strip().startswith(library + " ")]
            if not hits:
                found.append(f"{path} -> {library}: not on the loader's path")
                continue
            library = hits[0]
        try:
            ldd = subprocess.run(["ldd", library], capture_output=True, text=True, timeout=30).stdout
            missing = [line.split()[0] for line in ldd.splitlines() if "not found" in line]
        except (OSError, subprocess.TimeoutExpired):
            missing = ["(ldd failed)"]
        found.append(f"{path} -> {library}" + (f", lacks {' '.join(missing)}" if missing else ""))
    return found or ["no Vulkan driver manifest found"]


def selftest(c):
    out = {}
    # auto too: the time it takes to open is its smoke run of the first GPU that passes (issue 51).
    for device in [*c.args.devices, "auto"]:
        seconds, run = c.dptrain(["selftest", "--device", device, "--json"])
        try:
            report = json.loads(run.stdout)
        except json.JSONDecodeError:
            report = {"error": (run.stderr.strip() or run.stdout.strip())[-2000:]}
        out[device] = {"wall_seconds": round(seconds, 1), "exit": run.returncode, **report}
    return out


def side_by_side_phase(c):
    shapes = side_by_side.WORKLOADS[c.args.shapes]
    chosen = [w for w in shapes if not c.args.only or w[0] in c.args.only.split(",")]
    devices = c.usable()
    rows = side_by_side.side_by_side(c.args.dptrain, c.args.torch_device, devices, chosen, c.args.rounds,
                                     c.args.steps, env=c.env, log=c.log_file,
                                     deadline=time.monotonic() + c.left())
    return {"rounds": c.args.rounds, "steps": c.args.steps, "torch_device": c.args.torch_device, "devices": devices,
            "rows": rows}


def cold_start(c):
    out = {}
    bench = ["bench", "--model", "mnist-cnn", "--lot-size", "256", "--iterations", "1", "--warmup", "0",
             "--mechanisms", "gaussian", "--activation", "relu"]
    for device in c.usable():
        cache = os.path.join(c.work, f"cold-{device}")
        # CubeCL's caches, Mesa's and NVIDIA's shader caches, all in one empty folder.
        env = dict(c.env, XDG_CACHE_HOME=cache, __GL_SHADER_DISK_CACHE_PATH=cache)
        runs = []
        for _ in range(2):
            seconds, run = c.dptrain([*bench, "--device", device], env=env)
            runs.append(round(seconds, 1) if run.returncode == 0 else f"failed: {run.stderr.strip()[-300:]}")
        out[device] = {"first_run_seconds": runs[0], "second_run_seconds": runs[1]}
    return out


def first_usable(c):
    """The device the single-device phases run on: the first whose self-test passed."""
    devices = c.usable()
    if not devices:
        raise RuntimeError(f"no device of {', '.join(c.args.devices)} passed its self-test")
    return devices[0]


def main_job(c):
    device = first_usable(c)
    args = [*MAIN_JOB, "--device", device, "--out-dir", os.path.join(c.work, "main-job"), "--overwrite", "--json"]
    if c.args.data_dir:
        args += ["--data-dir", c.args.data_dir]
    if c.args.main_job_epochs:
        args[args.index("--epochs") + 1] = str(c.args.main_job_epochs)
    # The ScatterNet features are computed, as on a user's first run.
    seconds, run = c.dptrain(args, env=dict(c.env, DPTRAIN_CACHE_DIR=os.path.join(c.work, "main-job-cache")))
    if run.returncode != 0:
        raise RuntimeError(f"dptrain train on {device} failed: {run.stderr.strip()[-1000:]}")
    report = json.loads(run.stdout)
    keep = ("test_accuracy", "epsilon", "delta", "guarantee", "accountant", "steps", "seconds", "device")
    return {"device": device, "wall_seconds": round(seconds, 1), "command": "dptrain " + " ".join(args),
            **{k: report.get(k) for k in keep}}


def kernels(c):
    device = first_usable(c)
    out = {}
    for model, dataset, lot in c.args.profiled:
        folder = os.path.join(c.work, f"profile-{model}")
        os.makedirs(folder, exist_ok=True)
        log = os.path.join(folder, "profile.log")
        # CubeCL reads cubecl.toml from the working directory: its profiler times every launch.
        with open(os.path.join(folder, "cubecl.toml"), "w") as f:
            f.write(f'[profiling.logger]\nlevel = "basic"\nfile = "{log}"\nappend = false\n')
        warmup, lots = 2, 3
        bench = ["bench", "--model", model, "--dataset", dataset, "--lot-size", str(lot), "--activation", "relu",
                 "--mechanisms", "gaussian", "--warmup", str(warmup), "--iterations", str(lots), "--device", device]
        seconds, run = c.dptrain(bench, cwd=folder)
        if run.returncode != 0:
            raise RuntimeError(f"dptrain bench of {model} on {device} failed: {run.stderr.strip()[-1000:]}")
        per_kernel = {}
        for line in open(log, encoding="utf-8", errors="replace") if os.path.exists(log) else []:
            m = PROFILED.match(line.strip())
            if m:
                ms = float(m.group(1)) * UNIT_MS[m.group(2)]
                # Kernel names hold their type arguments, separated by '|': cut to the name.
                name = re.sub(r"\s+", " ", m.group(3)).replace("|", "/")[:100]
                per_kernel.setdefault(name, []).append(ms)
        if not per_kernel:
            raise RuntimeError(f"CubeCL's profiler logged no kernel to {log}")
        total = sum(sum(v) for v in per_kernel.values())
        top = sorted(per_kernel.items(), key=lambda kv: -sum(kv[1]))[:15]
        out[model] = {
            "lot": lot, "lots_profiled": warmup + lots, "launches": sum(len(v) for v in per_kernel.values()),
            "ms_per_lot": round(total / (warmup + lots), 3),
            "top": [{"kernel": k, "ms_per_lot": round(sum(v) / (warmup + lots), 4), "launches": len(v),
                     "share": round(sum(v) / total, 4) if total else None} for k, v in top],
        }
    return out


def step_phases(c):
    """Where each step's time goes on the GPU (`dptrain bench --phases`): none and gaussian, each
    phase timed between device synchronisations, median ms per lot."""
    device = first_usable(c)
    out = {}
    for model, dataset, lot in c.args.profiled:
        bench = ["bench", "--model", model, "--dataset", dataset, "--lot-size", str(lot), "--activation", "relu",
                 "--mechanisms", "none,gaussian", "--warmup", "2", "--iterations", "3", "--device", device,
                 "--phases", "--json"]
        seconds, run = c.dptrain(bench)
        if run.returncode != 0:
            raise RuntimeError(f"dptrain bench --phases of {model} on {device} failed: {run.stderr.strip()[-1000:]}")
        workload = json.loads(run.stdout)["workloads"][0]
        out[model] = {"lot": lot, "device": device, "ms_per_lot": workload["ms_per_lot"],
                      "phases_ms": workload["phases_ms"], "wall_seconds": round(seconds, 1)}
    return out


def markdown(r):
    """The results as markdown tables."""
    lines = ["# GPU check", ""]
    env = r.get("environment", {})
    lines += [f"- {k}: {v}" for k, v in env.items()] + [f"- total: {r.get('seconds')} s", ""]
    for name, why in r.get("skipped", {}).items():
        lines.append(f"- phase {name} skipped: {why}")
    phases = {name: p for name, p in r["phases"].items() if "error" not in p}
    lines += [f"- phase {name} failed: {p['error']}" for name, p in r["phases"].items() if "error" in p]
    if "selftest" in phases:
        lines += ["", "## selftest", "", "| device | checks | failed | wall time (s) | opened in (s): auto's smoke run |",
                  "|---|---|---|---|---|"]
        failures = []
        for device, s in phases["selftest"].items():
            chosen = [t["device"] for t in s.get("tried", []) if t.get("outcome") == "chosen"]
            seconds = s.get("open_seconds")
            opened = (f"{seconds:.2f}" if isinstance(seconds, (int, float)) else "-") + (f" (chose {chosen[0]})" if chosen else "")
            lines.append(f"| {device} | {len(s.get('checks', []))} | {s.get('failed', s.get('error'))} "
                         f"| {s['wall_seconds']} | {opened} |")
            failures += [f"- {device} FAILED {c['check']}" for c in s.get("checks", []) if not c["passed"]]
        lines += [""] + failures if failures else []
    if "side-by-side" in phases:
        p = phases["side-by-side"]
        lines += ["", f"## ms per step (median of {p['rounds']} interleaved rounds x {p['steps']} steps; "
                  f"PyTorch on {p['torch_device']})", "", side_by_side.table(p["rows"], p.get("devices", env.get("devices", [])))]
    if "cold-start" in phases:
        lines += ["", "## cold start: one-lot bench, wall time (s)", "", "| device | empty caches | caches kept |",
                  "|---|---|---|"]
        for device, s in phases["cold-start"].items():
            lines.append(f"| {device} | {s['first_run_seconds']} | {s['second_run_seconds']} |")
    if "main-job" in phases:
        m = phases["main-job"]
        lines += ["", "## main job", ""] + [f"- {k}: {v}" for k, v in m.items()]
    if "kernels" in phases:
        for model, k in phases["kernels"].items():
            lines += ["", f"## kernels of a DP-SGD lot, {model}"]
            lines += [f"lot {k['lot']}, {k['ms_per_lot']} ms of kernels per lot, {k['launches']} launches over "
                      f"{k['lots_profiled']} lots", "", "| kernel | ms per lot | launches | share |", "|---|---|---|---|"]
            lines += [f"| {t['kernel']} | {t['ms_per_lot']} | {t['launches']} | {t['share']:.1%} |" for t in k["top"]]
    if "step-phases" in phases:
        for model, p in phases["step-phases"].items():
            none, gaussian = p["phases_ms"]["none"], p["phases_ms"]["gaussian"]
            lines += ["", f"## phases of a step, {model} on {p['device']} (lot {p['lot']}, median ms per lot, the "
                      "device synchronised at each boundary)", "", "| phase | none | gaussian |", "|---|---|---|"]
            order = ["forward", "backward", "norms", "clip-factors", "clipped-sums", "noise", "update"]
            named = [name for name in order if name in gaussian] + [n for n in gaussian if n not in order]
            lines += [f"| {name} | {none[name]:.2f} | {gaussian[name]:.2f} |" for name in named]
            lines.append(f"| the lot | {p['ms_per_lot']['none']:.2f} | {p['ms_per_lot']['gaussian']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dptrain", required=True, help="the dptrain binary")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--dry-run", action="store_true", help="wgpu (lavapipe) and PyTorch on the CPU, CPU shapes")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--only", help="comma-separated workloads of the side-by-side (default: all three)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--data-dir", help="Fashion-MNIST for the main job (default: dptrain's own search)")
    parser.add_argument("--main-job-epochs", type=int, help="fewer epochs than the main job's 40 (a dry run)")
    parser.add_argument("--deadline", type=float, default=450, help="seconds; phases that would start later are skipped")
    args = parser.parse_args()
    # Phases run dptrain from folders of their own (the profiler reads cubecl.toml there).
    args.dptrain = os.path.abspath(args.dptrain)
    args.data_dir = args.data_dir and os.path.abspath(args.data_dir)
    args.devices = ["wgpu"] if args.dry_run else ["cuda", "wgpu"]
    args.torch_device = "cpu" if args.dry_run else "cuda"
    args.shapes = "cpu" if args.dry_run else "gpu"
    # wrn-16-4 takes minutes a lot on lavapipe: a dry run profiles the small CNN only.
    args.profiled = [("mnist-cnn", "fashion-mnist", 256)] + ([] if args.dry_run else [("wrn-16-4", "cifar10", 256)])
    chosen = args.phases.split(",")
    unknown = [p for p in chosen if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {unknown}: choose from {', '.join(PHASES)}")
    warnings.filterwarnings("ignore")  # torch's and opacus's, in the log
    c = Check(args)
    c.results["environment"] = environment(c)
    c.save()
    runners = {"selftest": selftest, "side-by-side": side_by_side_phase, "cold-start": cold_start,
               "main-job": main_job, "kernels": kernels, "step-phases": step_phases}
    failed = False
    for phase in PHASES:
        if phase not in chosen:
            continue
        if phase == "main-job" and not (args.dry_run or args.data_dir):
            c.results["skipped"][phase] = ("no Fashion-MNIST carried: a second call, scripts/gpu-check.sh --phases "
                                           "main-job carrying .gpu-check-data, runs it")
            continue
        if c.left() < 20:
            c.results["skipped"][phase] = f"{c.left():.0f} s left of the {args.deadline:.0f} s deadline"
            c.log(f"skipped {phase}: out of time")
            continue
        c.log(f"phase {phase}")
        try:
            c.results["phases"][phase] = runners[phase](c)
        except Exception as e:  # one phase's failure must not lose the others' figures
            failed = True
            c.results["phases"][phase] = {"error": f"{e.__class__.__name__}: {e}"}
            c.log(f"phase {phase} failed: {e}")
        c.save()
    selftests = c.results["phases"].get("selftest", {})
    failed |= any(s.get("exit") != 0 for s in selftests.values())
    print(markdown(c.results))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
