"""The CNN of crates/dp-run/examples/burn_cnn.rs in PyTorch, trained with Opacus as its user
would: Conv2d(1, 16, 3, padding 1), GroupNorm(4, 16), ReLU, MaxPool2d(2), Conv2d(16, 32, 3,
padding 1), GroupNorm(4, 32), ReLU, MaxPool2d(2), Linear(1568, 10), on Fashion-MNIST normalised
as dp-train normalises it, Poisson lots of 256 (Opacus's default), DP-SGD at lr 0.5, clip 1 and
the noise multiplier that dp-train calibrated for epsilon 3 over two epochs, for two epochs, the
test accuracy evaluated after each epoch and at the end as dp-run's `Run` evaluates it. Prints one
JSON line: the seconds of that loop (training and evaluations, as `Run` counts its own) and the
final test accuracy.

Run by scripts/burn-cnn-vs-opacus.sh in a throwaway virtual environment (torch and opacus from
PyPI), never by CI.
"""

import argparse
import gzip
import json
import struct
import time

import numpy as np
import torch
from opacus import PrivacyEngine

FASHION = "/usr/share/datasets/fashion-mnist"
# dp-train's Fashion-MNIST normalisation (dp_data::catalog).
MEAN, STD = 0.2860, 0.3530


def idx(path):
    """An IDX file's array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def split(prefix):
    images = idx(f"{FASHION}/{prefix}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    labels = idx(f"{FASHION}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    x = torch.from_numpy((images - MEAN) / STD).unsqueeze(1)
    return torch.utils.data.TensorDataset(x, torch.from_numpy(labels))


def cnn():
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--noise-multiplier", type=float, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train, test = split("train"), split("t10k")
    model = cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(train, batch_size=256)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=args.noise_multiplier,
        max_grad_norm=1.0)
    criterion = torch.nn.CrossEntropyLoss()

    def accuracy():
        model.eval()
        with torch.no_grad():
            x, y = test.tensors
            correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in zip(x.split(1000), y.split(1000)))
        model.train()
        return correct / len(y)

    started = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        accuracy()
    accuracy = accuracy()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "test_accuracy": accuracy, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
