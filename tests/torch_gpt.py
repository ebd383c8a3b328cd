"""torch_gpt.py - the PyTorch side of tests/test_vs_torch.sh for dtbench's transformers: GPT-2
written independently of dtbench (torch.nn modules; attention by scaled_dot_product_attention with
is_causal=True where this PyTorch has it, else nanoGPT's masked softmax; GELU's tanh approximation;
the head tied to the token embedding), trained from
dtbench's own initial parameters on the same token windows, the way dtbench trains it, in float32
and float64. Writes the loss of every step (OUT.json: losses, losses_f64) and the final parameters
(OUT.params: float32, dtbench's layout and header; OUT.params64: float64, raw).

Usage: torch_gpt.py MODEL TEXT SEQ INIT.params ITERS OPTIMIZER LR OUT.json OUT.params
  MODEL      nanogpt-char or gpt2 (their shapes below)
  TEXT       the training text, read as bytes: token = byte; sample i is bytes [i SEQ, i SEQ + SEQ]
             and its labels the next bytes; the file holds exactly one batch (B SEQ + 1 bytes), so
             that every step trains on all of it, in any order
  OPTIMIZER  sgd (momentum 0.9, no weight decay) or adamw (betas 0.9, 0.95, eps 1e-8, weight
             decay 0.1 on the tensors of 2 or more dimensions, as nanoGPT configures it)
Needs torch and numpy only (Debian's python3-torch, installed by scripts/setup.sh)."""
import os
import sys

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_ref import load_flat, read_params, write_results  # noqa: E402
from torch_ref import optimizer as make_optimizer  # noqa: E402

SHAPES = {  # blocks, heads, width, context, vocabulary
    "nanogpt-char": (6, 6, 384, 256, 256),
    "gpt2": (12, 12, 768, 1024, 50257),
}


class Block(nn.Module):
    """Pre-layer-norm block; attributes in the order of dtbench's rows: ln_1, c_attn, c_proj,
    ln_2, c_fc, mlp_proj."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch before 2.0: nanoGPT's attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.shape[-1] ** 0.5))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    """wte, wpe, the blocks, ln_f; the head multiplies by wte (tied)."""

    def __init__(self, blocks, heads, width, context, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T


def train(net, flat, x, y, iters, optimizer, lr, dtype):
    """net from the flat parameters, trained `iters` steps in `dtype`: (losses, parameters)."""
    net, params = load_flat(net, flat, dtype)
    opt = make_optimizer(params, lr, 0.9, (0.9, 0.95, 1e-8, 0.1) if optimizer == "adamw" else None)
    losses = []
    for _ in range(iters):
        opt.zero_grad()
        logits = net(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, torch.cat([p.detach().reshape(-1) for p in params]).double().numpy()


def main():
    model, text, seq, init, iters, optimizer, lr, out_json, out_params = sys.argv[1:10]
    seq, iters, lr = int(seq), int(iters), float(lr)
    if model not in SHAPES or optimizer not in ("sgd", "adamw"):
        sys.exit(f"unknown model {model} or optimizer {optimizer}")
    torch.set_num_threads(1)
    data = np.fromfile(text, np.uint8).astype(np.int64)
    n = (data.size - 1) // seq
    if n * seq + 1 != data.size:
        sys.exit(f"{text}: {data.size} bytes is not one batch of {seq}-byte windows plus one")
    x = torch.from_numpy(np.stack([data[i * seq:i * seq + seq] for i in range(n)]))
    y = torch.from_numpy(np.stack([data[i * seq + 1:i * seq + seq + 1] for i in range(n)]))
    head, flat = read_params(init)
    total = sum(p.numel() for p in GPT(*SHAPES[model]).parameters())
    if total != flat.size:
        sys.exit(f"{model}: PyTorch has {total} parameters, {init} holds {flat.size}")
    run32 = train(GPT(*SHAPES[model]), flat, x, y, iters, optimizer, lr, torch.float32)
    run64 = train(GPT(*SHAPES[model]), flat, x, y, iters, optimizer, lr, torch.float64)
    write_results(out_json, out_params, head, {"model": model, "batch": n, "parameters": total},
                  run32, run64)


if __name__ == "__main__":
    main()
