"""Reference logits for dptrain's wrn-16-4 loaded from a PyTorch-layout weight file (tests/zoo_weights.rs).

WRN-16-4 as dptrain's zoo builds it (src/zoo/wide_resnet.rs): a weight-standardised 3x3 stem of 16
channels (no bias), three groups of two pre-activation blocks (GroupNorm(16) -> ReLU -> WS conv 3x3
-> GroupNorm(16) -> ReLU -> WS conv 3x3, plus a 1x1 WS conv of the normalised input where the shape
changes) of 64, 128 and 256 channels (strides 1, 2, 2), a final GroupNorm and ReLU, global average
pooling and a linear head. Weight standardisation: per output channel, (w - mean) / sqrt(var + 1e-5)
with the biased variance. The 2.7 M weights are not committed: every tensor of the state dict,
in order, is filled by a formula the Rust test repeats (tensor t, element i: 0.1 sin(0.37 i + 1.3 t),
GroupNorm weights 1 + that), and the names, shapes, fixed inputs and logits are written.

Run (PyTorch 2.15.0 CPU in the throwaway venv /var/tmp/dp-bench-venv):
    /var/tmp/dp-bench-venv/bin/python scripts/reference/torch_wrn.py tests/data/wrn_16_4.json
"""
import json
import math
import sys

import torch
from torch import nn
import torch.nn.functional as F


class WsConv(nn.Conv2d):
    def forward(self, x):
        w = self.weight.flatten(1)
        w = (w - w.mean(1, keepdim=True)) / torch.sqrt(w.var(1, unbiased=False, keepdim=True) + 1e-5)
        return F.conv2d(x, w.view_as(self.weight), None, self.stride, self.padding)


def conv(c_in, c_out, k, stride):
    return WsConv(c_in, c_out, k, stride=stride, padding=k // 2, bias=False)


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.norm1 = nn.GroupNorm(16, c_in)
        self.conv1 = conv(c_in, c_out, 3, stride)
        self.norm2 = nn.GroupNorm(16, c_out)
        self.conv2 = conv(c_out, c_out, 3, 1)
        self.shortcut = conv(c_in, c_out, 1, stride) if (c_in != c_out or stride != 1) else None

    def forward(self, x):
        o = F.relu(self.norm1(x))
        skip = self.shortcut(o) if self.shortcut is not None else x
        h = F.relu(self.norm2(self.conv1(o)))
        return self.conv2(h) + skip


class Wrn(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.stem = conv(channels, 16, 3, 1)
        blocks, c_in = [], 16
        for group, stride in enumerate([1, 2, 2]):
            c_out = 64 << group
            for b in range(2):
                blocks.append(Block(c_in, c_out, stride if b == 0 else 1))
                c_in = c_out
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.GroupNorm(16, c_in)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        h = F.relu(self.norm(h))
        return self.head(h.mean((2, 3)))


def main(out):
    model = Wrn(3, 10)
    state = model.state_dict()
    with torch.no_grad():
        for t, (name, tensor) in enumerate(state.items()):
            i = torch.arange(tensor.numel(), dtype=torch.float64)
            values = 0.1 * torch.sin(0.37 * i + 1.3 * t)
            is_norm_weight = name.endswith("weight") and tensor.dim() == 1
            tensor.copy_((values + (1.0 if is_norm_weight else 0.0)).reshape(tensor.shape).to(torch.float32))
    model.eval()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 32, 32, generator=g)
    with torch.no_grad():
        logits = model(x)
    json.dump(
        {
            "provenance": f"scripts/reference/torch_wrn.py, PyTorch {torch.__version__}, CPU, float32",
            "formula": "tensor t (state-dict order), element i: 0.1 sin(0.37 i + 1.3 t), plus 1 for 1-d weights (GroupNorm)",
            "names": [[k, list(v.shape)] for k, v in state.items()],
            "inputs": x.flatten().tolist(),
            "logits": logits.flatten().tolist(),
        },
        open(out, "w"),
    )


if __name__ == "__main__":
    main(sys.argv[1])
