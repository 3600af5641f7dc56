#!/usr/bin/env python3
"""dptrain against PyTorch and Opacus on the same machine, in one run (issue 26).

Times, interleaved round by round, on three workloads (ReLU everywhere, random inputs of the
data set's shape, one optimiser step per lot of fixed size):

  PyTorch plain     an ordinary training step of the same model
  Opacus hooks      GradSampleModule + DPOptimizer (per-sample gradients materialised by hooks)
  Opacus ghost      ghost clipping (grad_sample_mode="ghost": two backward passes, no per-sample
                    gradients)
  dptrain none      plain Burn training of the zoo model (`dptrain bench --mechanisms none`)
  dptrain gaussian  dptrain's DP-SGD step (`dptrain bench --mechanisms gaussian`)

and prints one table of median milliseconds per step. `side_by_side` and `table` also serve
scripts/gpu_check.py (dptrain on several devices, PyTorch optional). Run through scripts/side-by-side.sh, which
makes the throwaway virtual environment with torch and opacus from PyPI (never a dependency of the
repository or of CI). A loaded machine measures nothing (PyTorch's OpenMP threads slow down up to
ten times when the cores are oversubscribed): the script refuses to start when the load average
is above --max-load.

Differences that remain, stated in the table's notes: dptrain's wrn-16-4 uses weight-standardised
convolutions (De et al. 2022); Opacus has no per-sample gradient for a weight standardisation, so
its wrn-16-4 uses plain convolutions, which cost less.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

# name, dptrain model, dataset shape (for dptrain), input [C, H, W], lot
WORKLOADS = {
    # The CPU's: what a 2-core machine times in minutes.
    "cpu": [
        ("mnist-cnn", "mnist-cnn", "fashion-mnist", (1, 28, 28), 256),
        ("cifar10-cnn", "cifar10-cnn", "cifar10", (3, 32, 32), 128),
        ("wrn-16-4", "wrn-16-4", "fashion-mnist", (1, 28, 28), 64),
    ],
    # A GPU's: seed 004's Table I lot for the CIFAR-10 CNN, De et al.'s network on CIFAR-10 shapes.
    "gpu": [
        ("mnist-cnn", "mnist-cnn", "fashion-mnist", (1, 28, 28), 256),
        ("cifar10-cnn", "cifar10-cnn", "cifar10", (3, 32, 32), 500),
        ("wrn-16-4", "wrn-16-4", "cifar10", (3, 32, 32), 256),
    ],
}
TORCH_MODES = ("plain", "hooks", "ghost")


def refuse_when_loaded(max_load):
    load = os.getloadavg()[0]
    if load > max_load:
        sys.exit(
            f"the 1-minute load average is {load:.2f} (above --max-load {max_load}): wait for a quiet "
            "machine; PyTorch's threads slow down many times when the cores are busy"
        )


def models(torch):
    nn = torch.nn

    def mnist_cnn():
        return nn.Sequential(
            nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
            nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10),
        )

    def cifar10_cnn():
        layers, c_in = [], 3
        for c in (32, 64, 128):
            layers += [nn.Conv2d(c_in, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
                       nn.MaxPool2d(2, 2)]
            c_in = c
        layers += [nn.Flatten(), nn.Linear(128 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                   nn.Linear(128, 10)]
        return nn.Sequential(*layers)

    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.norm1, self.norm2 = nn.GroupNorm(16, c_in), nn.GroupNorm(16, c_out)
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.shortcut = nn.Conv2d(c_in, c_out, 1, stride, bias=False) if c_in != c_out or stride != 1 else None

        def forward(self, x):
            o = torch.relu(self.norm1(x))
            skip = self.shortcut(o) if self.shortcut is not None else x
            return self.conv2(torch.relu(self.norm2(self.conv1(o)))) + skip

    class WideResNet(nn.Module):
        def __init__(self, channels, classes):
            super().__init__()
            self.stem = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
            blocks, c_in = [], 16
            for group, stride in enumerate((1, 2, 2)):
                c_out = 64 << group
                for b in range(2):
                    blocks.append(Block(c_in, c_out, stride if b == 0 else 1))
                    c_in = c_out
            self.blocks = nn.Sequential(*blocks)
            self.norm = nn.GroupNorm(16, c_in)
            self.head = nn.Linear(c_in, classes)

        def forward(self, x):
            h = torch.relu(self.norm(self.blocks(self.stem(x))))
            return self.head(h.mean(dim=(2, 3)))

    return {"mnist-cnn": lambda shape: mnist_cnn(), "cifar10-cnn": lambda shape: cifar10_cnn(),
            "wrn-16-4": lambda shape: WideResNet(shape[0], 10)}


class TorchStep:
    """One way of training a model on a fixed lot, timed step by step."""

    def __init__(self, torch, build, mode, x, y, device):
        self.torch, self.x, self.y, self.device = torch, x, y, device
        model = build(tuple(x.shape[1:])).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.criterion = torch.nn.CrossEntropyLoss()
        if mode != "plain":
            from opacus import PrivacyEngine

            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(x))
            engine = PrivacyEngine()
            kwargs = dict(noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
            if mode == "ghost":
                model, optimizer, self.criterion, _ = engine.make_private(
                    module=model, optimizer=optimizer, data_loader=loader, criterion=self.criterion,
                    grad_sample_mode="ghost", **kwargs)
            else:
                model, optimizer, _ = engine.make_private(
                    module=model, optimizer=optimizer, data_loader=loader, grad_sample_mode="hooks", **kwargs)
        self.model, self.optimizer = model, optimizer
        self.step()

    def step(self):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(self.x), self.y)
        loss.backward()
        self.optimizer.step()

    def time(self, steps):
        out = []
        for _ in range(steps):
            start = time.perf_counter()
            self.step()
            if self.device != "cpu":
                self.torch.cuda.synchronize()
            out.append((time.perf_counter() - start) * 1e3)
        return out


def dptrain_times(binary, model, dataset, lot, device, steps, env=None, deadline=None):
    """Median ms per lot of dptrain's plain and DP-SGD steps (one `dptrain bench` process, ended
    at `deadline`, a time.monotonic() value, if given), the machine dptrain says it ran on (its
    CPU, the vector instructions its host kernels dispatch to, caches, threads) and the kernel of
    each pass of each layer (both None from an older dptrain)."""
    command = [binary, "bench", "--model", model, "--dataset", dataset, "--activation", "relu",
               "--lot-size", str(lot), "--device", device, "--iterations", str(steps), "--warmup", "1", "--json"]
    timeout = None if deadline is None else max(deadline - time.monotonic(), 1)
    run = subprocess.run(command + ["--mechanisms", "none,gaussian"], capture_output=True, text=True, env=env,
                         timeout=timeout)
    if run.returncode == 2 and "--mechanisms" in run.stderr:
        # A dptrain from before `--mechanisms` (to time an old binary): it times all of them.
        run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{binary} bench --device {device} failed: {run.stderr.strip()}")
    out = json.loads(run.stdout)
    workload = out["workloads"][0]
    ms = workload["ms_per_lot"]
    return ms["none"], ms["gaussian"], out.get("machine"), workload.get("kernels")


def import_torch():
    """torch and opacus, or (None, None) where they are not installed (then only dptrain is timed)."""
    try:
        import torch
        import opacus
    except ImportError:
        return None, None
    return torch, opacus


def side_by_side(dptrain, torch_device, dp_devices, workloads, rounds, steps, env=None, log=sys.stderr, deadline=None):
    """Rows of median ms per step, one per workload, every variant timed once per round (interleaved):
    {"workload", "lot", "ms": {variant: median or None}}; PyTorch's variants are None without torch."""
    torch, _ = import_torch()
    builds = models(torch) if torch else {}
    rows = []
    for name, model, dataset, shape, lot in workloads:
        steps_of = {}
        if torch:
            torch.manual_seed(0)
            x = torch.randn(lot, *shape, device=torch_device)
            y = torch.randint(0, 10, (lot,), device=torch_device)
            steps_of = {mode: TorchStep(torch, builds[name], mode, x, y, torch_device) for mode in TORCH_MODES}
        times = {k: [] for k in [*TORCH_MODES, *(f"{d} {m}" for d in dp_devices for m in ("none", "gaussian"))]}
        machine, kernels = None, {}
        for r in range(rounds):
            for mode, step in steps_of.items():
                times[mode] += step.time(steps)
            for d in dp_devices:
                timed = dptrain_times(dptrain, model, dataset, lot, d, steps, env, deadline)
                none, gaussian, machine, kernels[d] = timed
                times[f"{d} none"].append(none)
                times[f"{d} gaussian"].append(gaussian)
            print(f"{name} round {r + 1}/{rounds} done", file=log, flush=True)
        rows.append({"workload": name, "lot": lot, "machine": machine, "kernels": kernels,
                     "ms": {k: statistics.median(v) if v else None for k, v in times.items()}})
    return rows


def table(rows, dp_devices):
    """The rows as a markdown table, with the ratios that compare dptrain to Opacus, to its plain step
    and to PyTorch's plain step."""
    def cell(v):
        return "absent (no torch)" if v is None else f"{v:.1f}"

    def ratio(a, b):
        return "-" if a is None or b is None else f"{a / b:.2f}"

    heads = ["PyTorch plain", "Opacus hooks", "Opacus ghost"]
    for d in dp_devices:
        heads += [f"dptrain none ({d})", f"dptrain gaussian ({d})", f"gaussian / best Opacus ({d})",
                  f"gaussian / none ({d})", f"none / PyTorch plain ({d})", f"gaussian / PyTorch plain ({d})"]
    lines = ["| workload | lot | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    for row in rows:
        m = row["ms"]
        best = None if m["hooks"] is None else min(m["hooks"], m["ghost"])
        cells = [cell(m[k]) for k in TORCH_MODES]
        for d in dp_devices:
            none, gaussian = m[f"{d} none"], m[f"{d} gaussian"]
            cells += [cell(none), cell(gaussian), ratio(gaussian, best), ratio(gaussian, none), ratio(none, m["plain"]),
                      ratio(gaussian, m["plain"])]
        lines.append(f"| {row['workload']} | {row['lot']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine_line(machine):
    """dptrain's description of the machine (`dptrain bench --json`'s "machine"), as one line."""
    if not machine:
        return f"{cpu_name()}, {os.cpu_count()} cores"
    caches = " / ".join(f"L{c['level']} {c['bytes'] >> 10} KiB" for c in machine.get("caches", []))
    return f"{machine['cpu']}, {machine['isa']}, {machine['threads']} threads, caches {caches}"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dptrain", required=True, help="the dptrain binary")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="PyTorch's device")
    parser.add_argument("--dptrain-devices", help="comma-separated dptrain devices [default: cpu, or wgpu "
                        "with --device cuda]; e.g. cuda,wgpu with a dptrain built with --features cuda")
    parser.add_argument("--shapes", choices=list(WORKLOADS), help="the workloads' lots and shapes "
                        "[default: cpu, or gpu with --device cuda]")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians over all)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant per round")
    parser.add_argument("--max-load", type=float, default=0.5, help="refuse above this 1-minute load average")
    parser.add_argument("--only", help="comma-separated workloads (default: all three)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    refuse_when_loaded(args.max_load)
    warnings.filterwarnings("ignore")
    torch, opacus = import_torch()
    if torch is None:
        sys.exit("torch and opacus are not importable: run through scripts/side-by-side.sh")
    dp_devices = (args.dptrain_devices or ("wgpu" if args.device == "cuda" else "cpu")).split(",")
    shapes = args.shapes or ("gpu" if args.device == "cuda" else "cpu")
    chosen = [w for w in WORKLOADS[shapes] if not args.only or w[0] in args.only.split(",")]
    rows = side_by_side(args.dptrain, args.device, dp_devices, chosen, args.rounds, args.steps)
    print(f"machine: {machine_line(rows[0].get('machine') if rows else None)}; {os.cpu_count()} cores; "
          f"torch {torch.__version__}, opacus {opacus.__version__}, "
          f"torch threads {torch.get_num_threads()}; PyTorch on {args.device}, dptrain on {', '.join(dp_devices)}; "
          f"{args.rounds} rounds x {args.steps} steps, medians in ms per step")
    print(table(rows, dp_devices))
    print("wrn-16-4: dptrain's convolutions are weight-standardised, Opacus's are plain (it has no per-sample "
          "gradient for a standardisation).")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
