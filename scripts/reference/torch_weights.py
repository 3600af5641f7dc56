"""Reference files for dp-engine's weight import and export (crates/dp-engine/tests/weights.rs).

A small PyTorch CNN (Conv2d 1->4 3x3 padding 1, GroupNorm(2, 4), tanh, Conv2d 4->6 3x3 stride 2,
tanh, flatten, Linear 6*4*4 -> 10) with seeded weights is saved by PyTorch as a state dict
(`torch.save`, the zip format: dp-engine refuses it, unpickling runs code) and as safetensors (written here from the same tensors: the
`safetensors` package is not installed in this offline venv; the format is an 8-byte little-endian
header length, a JSON header, then the raw little-endian data). Its logits on fixed inputs are
recorded. With --check FILE, the safetensors FILE that dp-engine exported is loaded into the same
PyTorch module and its logits printed beside the recorded dptrain logits.

Run (outside the repository's build; PyTorch 2.15.0 CPU in /var/tmp/dp-bench-venv):
    /var/tmp/dp-bench-venv/bin/python scripts/reference/torch_weights.py crates/dp-engine/tests/data/weights
"""
import json
import struct
import sys

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.fc = nn.Linear(6 * 4 * 4, 10)

    def forward(self, x):
        h = torch.tanh(self.norm(self.conv1(x)))
        h = torch.tanh(self.conv2(h))
        return self.fc(h.flatten(1))


def write_safetensors(path, tensors, metadata, half=False):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        kind, dtype = ("<f2", "F16") if half else ("<f4", "F32")
        data = t.detach().contiguous().to(torch.float32).numpy().astype(kind).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(h["shape"])
    return out, meta


def inputs():
    g = torch.Generator().manual_seed(7)
    return torch.randn(3, 1, 8, 8, generator=g)


def main(out):
    torch.manual_seed(1)
    model = SmallCnn()
    with torch.no_grad():
        # GroupNorm starts at weight 1, bias 0: give it values a swapped or untransposed load shows.
        model.norm.weight.copy_(torch.tensor([0.5, 1.5, -1.0, 2.0]))
        model.norm.bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    model.eval()
    x = inputs()
    with torch.no_grad():
        logits = model(x)
    state = model.state_dict()
    torch.save(state, f"{out}/small_cnn.pt")
    write_safetensors(f"{out}/small_cnn.safetensors", state, {"source": "torch_weights.py"})
    write_safetensors(f"{out}/small_cnn_f16.safetensors", state, {"source": "torch_weights.py"}, half=True)
    reference = {
        "provenance": f"scripts/reference/torch_weights.py, PyTorch {torch.__version__}, CPU, float32",
        "inputs": x.flatten().tolist(),
        "input_shape": list(x.shape),
        "logits": logits.flatten().tolist(),
        "names": {k: list(v.shape) for k, v in state.items()},
    }
    with open(f"{out}/small_cnn.json", "w") as f:
        json.dump(reference, f, indent=1)


def check(path):
    tensors, meta = read_safetensors(path)
    model = SmallCnn()
    model.load_state_dict(tensors, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(inputs())
    print(json.dumps({"metadata": meta, "logits": logits.flatten().tolist()}))


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        main(sys.argv[1])
