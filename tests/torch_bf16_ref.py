"""torch_bf16_ref.py - LeNet trained in PyTorch from dtbench's initial parameters, in float32 and
under torch.autocast("cpu", dtype=torch.bfloat16) (fp32 master weights, SGD with momentum), for
tests/test_precision_torch.sh. Reuses tests/torch_ref.py's model and readers.
    torch_bf16_ref.py DATA_DIR INIT_PARAMS ITERS LR MOMENTUM OUT_JSON"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch_ref import lenet, read_idx, read_params  # noqa: E402


def train(flat, x, y, iters, lr, momentum, autocast):
    net = lenet()
    off = 0
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(flat[off:off + p.numel()].copy()).view_as(p))
            off += p.numel()
    net.train()
    x = torch.from_numpy(x.astype(np.float32) / 255.0)
    y = torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    losses = []
    for _ in range(iters):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = net(x)
        loss = nn.functional.cross_entropy(logits.float(), y)  # the loss in fp32, as autocast does
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def main():
    folder, init, iters, lr, momentum, out = sys.argv[1:7]
    torch.set_num_threads(1)
    x, y = read_idx(folder, "train")
    _, flat = read_params(init)
    res = {"torch": torch.__version__,
           "fp32": train(flat, x, y, int(iters), float(lr), float(momentum), False),
           "bf16": train(flat, x, y, int(iters), float(lr), float(momentum), True)}
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
