"""torch_ref.py - the PyTorch side of tests/test_vs_torch.sh: trains a dtbench model in PyTorch
from dtbench's own initial parameters, on the same data, the way dtbench trains it, in float32
and in float64, and writes the loss of every step (OUT.json: losses, losses_f64) and the final
parameters (OUT.params: float32, dtbench's layout and header; OUT.params64: float64, raw).

Usage: torch_ref.py MODEL DATA_DIR INIT.params ITERS LR MOMENTUM OUT.json OUT.params
                   [adamw BETA1 BETA2 EPS WEIGHT_DECAY]
  MODEL     lenet (Fashion-MNIST IDX files in DATA_DIR), resnet8 or resnet50 (CIFAR-10 binary
            batches)
  INIT      dtbench --save-model file (64-byte DTBMODEL header, then float32 parameters in the
            order of src/model/models.c's rows: per layer its weights, then its bias; batch norm: scale,
            then shift)
  adamw     torch.optim.AdamW instead of SGD (MOMENTUM unused), with WEIGHT_DECAY on the parameters
            of 2 or more dimensions and none on the others (nanoGPT's groups)
The training set must hold exactly one batch: every step trains on all of it (dtbench visits it
in a shuffled order; the mean loss, the summed gradients and batch norm's batch statistics do
not depend on the order, so no sampler needs to be reimplemented here).
Written independently of dtbench: torch.nn modules, torch.optim.SGD (momentum, no dampening) or
torch.optim.AdamW, cross-entropy averaged over the batch, batch norm in training mode (momentum
0.1, eps 1e-5).
Needs torch and numpy only (Debian's python3-torch, installed by scripts/setup.sh)."""
import gzip
import json
import os
import struct
import sys

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def lenet():
    """Caffe's MNIST LeNet: no ReLU after the convolutions."""
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))


class Bottleneck(nn.Module):
    """torchvision's ResNet-50 block (stride in the 3x3 convolution); attributes registered in
    the order of dtbench's rows: conv1 bn1 conv2 bn2 conv3 bn3 [downsample, downsample_bn]."""

    def __init__(self, c_in, mid, out, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out)
        self.down = None
        if stride != 1 or c_in != out:
            self.down = nn.Sequential(nn.Conv2d(c_in, out, 1, stride, bias=False),
                                      nn.BatchNorm2d(out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class Basic(nn.Module):
    """ResNet's basic block (two 3x3 convolutions), attributes in the order of dtbench's rows:
    conv1 bn1 conv2 bn2 [downsample, downsample_bn]."""

    def __init__(self, c_in, out, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c_in, out, 3, stride, 1, bias=False), nn.BatchNorm2d(out)
        self.conv2, self.bn2 = nn.Conv2d(out, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out)
        self.down = None
        if stride != 1 or c_in != out:
            self.down = nn.Sequential(nn.Conv2d(c_in, out, 1, stride, bias=False),
                                      nn.BatchNorm2d(out))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet8(classes):
    """He et al. 2015's CIFAR-10 ResNet with n = 1, projection shortcuts."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        Basic(16, 16, 1), Basic(16, 32, 2), Basic(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def resnet50(classes):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    c = 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(c, mid, mid * 4, stride if b == 0 else 1))
            c = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, classes)]
    return nn.Sequential(*layers)


def read_params(path):
    with open(path, "rb") as f:
        head = f.read(64)
    version, n = struct.unpack("<QQ", head[8:24])
    if head[:8] != b"DTBMODEL" or version != 1:
        sys.exit(f"{path}: not a DTBMODEL version 1 file")
    data = np.fromfile(path, dtype="<f4", offset=64)
    if data.size != n:
        sys.exit(f"{path}: {data.size} floats, the header says {n}")
    return head, data


def read_idx(folder, prefix):
    def load(base):
        for name, opener in ((base + ".gz", gzip.open), (base, open)):
            p = os.path.join(folder, name)
            if os.path.exists(p):
                with opener(p, "rb") as f:
                    return f.read()
        sys.exit(f"{folder}: no {base}(.gz)")
    img, lab = load(f"{prefix}-images-idx3-ubyte"), load(f"{prefix}-labels-idx1-ubyte")
    n, rows, cols = struct.unpack(">III", img[4:16])
    x = np.frombuffer(img, np.uint8, offset=16).reshape(n, 1, rows, cols)
    return x, np.frombuffer(lab, np.uint8, offset=8)


def read_cifar(folder):
    recs = np.concatenate([np.fromfile(os.path.join(folder, f"data_batch_{b}.bin"), np.uint8)
                           for b in range(1, 6)
                           if os.path.exists(os.path.join(folder, f"data_batch_{b}.bin"))])
    recs = recs.reshape(-1, 1 + 3072)
    return recs[:, 1:].reshape(-1, 3, 32, 32), recs[:, 0]


def optimizer(params, lr, momentum, adamw):
    """SGD, or with adamw = (beta1, beta2, eps, weight_decay) AdamW in nanoGPT's two groups."""
    if not adamw:
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    beta1, beta2, eps, wd = adamw
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps)


def load_flat(net, flat, dtype):
    """net in `dtype` with the flat parameters (dtbench's layout: its parameters' order), and
    the list of its parameters."""
    net = net.to(dtype)
    params = list(net.parameters())
    off = 0
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(flat[off:off + p.numel()].astype(np.float64)).view_as(p))
            off += p.numel()
    assert off == flat.size, (off, flat.size)
    return net, params


def train(net, flat, x, y, iters, lr, momentum, dtype, adamw=None):
    """net from the flat parameters, trained `iters` steps in `dtype`: (losses, parameters)."""
    net, params = load_flat(net, flat, dtype)
    net.train()
    x = torch.from_numpy(x.astype(np.float64) / 255.0).to(dtype)  # dtbench's scaling
    y = torch.from_numpy(y.astype(np.int64))
    opt = optimizer(params, lr, momentum, adamw)
    losses = []
    for _ in range(iters):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, torch.cat([p.detach().reshape(-1) for p in params]).double().numpy()


def main():
    model, folder, init, iters, lr, momentum, out_json, out_params = sys.argv[1:9]
    iters, lr, momentum = int(iters), float(lr), float(momentum)
    adamw = tuple(float(v) for v in sys.argv[10:14]) if sys.argv[9:10] == ["adamw"] else None
    torch.set_num_threads(1)
    build = {"lenet": lenet, "resnet8": lambda: resnet8(10), "resnet50": lambda: resnet50(10)}
    if model not in build:
        sys.exit(f"unknown model {model}")
    x, y = read_idx(folder, "train") if model == "lenet" else read_cifar(folder)
    head, flat = read_params(init)
    total = sum(p.numel() for p in build[model]().parameters())
    if total != flat.size:
        sys.exit(f"{model}: PyTorch has {total} parameters, {init} holds {flat.size}")
    # float32 (what dtbench computes in) and float64 (the exact answer to within float32's
    # rounding): their distance is how sensitive this run is to rounding.
    l32, p32 = train(build[model](), flat, x, y, iters, lr, momentum, torch.float32, adamw)
    l64, p64 = train(build[model](), flat, x, y, iters, lr, momentum, torch.float64, adamw)
    write_results(out_json, out_params, head, {"model": model, "batch": int(x.shape[0]),
                                               "parameters": total}, (l32, p32), (l64, p64))


def write_results(out_json, out_params, head, about, run32, run64):
    """OUT.json (about, the losses of both runs), OUT.params (the float32 run's parameters in
    dtbench's layout, after INIT's header) and OUT.params64 (the float64 run's, raw)."""
    with open(out_json, "w") as f:
        json.dump({**about, "torch": torch.__version__, "losses": run32[0],
                   "losses_f64": run64[0]}, f)
    with open(out_params, "wb") as f:
        f.write(head)
        f.write(run32[1].astype("<f4").tobytes())
    run64[1].astype("<f8").tofile(out_params + "64")


if __name__ == "__main__":
    main()
