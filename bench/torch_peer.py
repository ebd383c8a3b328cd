#!/usr/bin/env python3
"""PyTorch peer of dtbench: the same networks, trained the same way, timed per step.

Run it with the interpreter that imports torch (on Debian: /usr/bin/python3 with
python3-torch; the pyenv python3 first on PATH has no torch):

    /usr/bin/python3 bench/torch_peer.py --model lenet --iters 50 --warmup 5 --threads 1

Prints one JSON object on stdout (diagnostics go to stderr).

What one timed step includes (compare with dtbench's /iterations/total, which covers its
data, forward, backward, exchange and update phases of one iteration):
  1. fetching the batch: the inputs and labels of the step are copied out of a pool of
     synthetic samples generated before the run (dtbench's data phase loads the batch into
     its input buffer; generating random numbers is kept out of both timed loops' cost here);
  2. optimizer.zero_grad();
  3. forward pass and nn.CrossEntropyLoss (softmax cross-entropy, mean over the batch);
  4. backward pass;
  5. optimizer.step() (SGD, momentum 0.9, lr 0.01, no weight decay; the transformers: AdamW,
     below).
Nothing else (no printing, no loss.item() sync) is inside the timed region: loss values are
read after the clock stops.

The transformers (nanogpt-char, gpt2, gpt2-medium) are tests/torch_gpt.py's GPT, imported from
there (written independently of dtbench; the head tied to the token embedding, counted once).
--seq-len: tokens per sample (default: the model's context); the samples are windows of uniform
random token ids whose labels are the next tokens; the loss is the mean cross-entropy over every
position. Attention: F.scaled_dot_product_attention(is_causal=True) where this PyTorch has it
(2.0 and later; flash attention on a GPU in bf16/fp16), else nanoGPT's masked softmax.
--optimizer auto (the default) takes dtbench's choice: AdamW for the transformers, with
nanoGPT's groups (--weight-decay, default 0.1, on the tensors of 2 or more dimensions; none on
biases and layer norms), betas (--beta1, --beta2) 0.9 and 0.95, eps 1e-8, fused on a GPU where
torch.optim.AdamW has it (as nanoGPT takes it); SGD for the others.

--device cuda: the network and optimizer live on the GPU. The clock is read after
torch.cuda.synchronize() on both sides of the step, so a step ends when its update has run on the
GPU (dtbench: its update's CUDA event). Where the batch comes from (--data):
  pageable  the pool stays in pageable host memory and step 1 copies the batch to the GPU
            (dtbench --prefetch off uploads its batch so, in its data phase);
  pinned    the pool is in page-locked memory; the next batch is copied on a side stream while
            the current step computes (queued after its backward, as dtbench --prefetch does) and
            the step waits for its batch's event: step 1 is that wait;
  device    the pool lives on the GPU: step 1 takes a slice (no copy).
--precision: fp32 is strict fp32 as dtbench's (TF32 off for cuDNN convolutions and cuBLAS
matmuls; PyTorch allows it for convolutions by default); tf32 allows both; default leaves
PyTorch's own settings untouched (TF32 for convolutions only, cudnn.benchmark off); bf16/fp16 run
forward and loss under torch.autocast, fp16 with GradScaler. --cudnn-benchmark sets
torch.backends.cudnn.benchmark (as dtbench's --conv-algo find times the algorithms once),
--channels-last puts the network and 4-D inputs in torch.channels_last.
"""
import argparse
import contextlib
import inspect
import json
import os
import sys
import time


TRANSFORMERS = ("nanogpt-char", "gpt2", "gpt2-medium")
MODELS = ("lenet", "fcn5", "fcn8", "alexnet", "vgg16", "googlenet", "resnet50", "lstm32",
          "lstm64") + TRANSFORMERS
# dtbench's counts (src/model/models.c); PyTorch's nn.LSTM carries a second, redundant bias vector per
# layer (b_hh beside b_ih: 4*256 floats, 2048 in all), which dtbench's LSTM (one bias, as in
# DLBench's TensorFlow model) does not have.
EXPECTED_PARAMS = {"lenet": 431080, "fcn5": 117997696, "fcn8": 130586752, "alexnet": 61100840,
                   "vgg16": 138357544, "googlenet": 6998552, "resnet50": 25557032,
                   "lstm32": 6180624 + 2048, "lstm64": 6180624 + 2048,
                   "nanogpt-char": 10844160, "gpt2": 124439808, "gpt2-medium": 354823168}
# blocks, heads, width, context, vocabulary (tests/torch_gpt.py's SHAPES, and GPT-2 medium)
GPT_MEDIUM = (24, 16, 1024, 1024, 50257)
FCN_DIM = 26752      # input features and classes of fcn5/fcn8
FCN_HIDDEN = 2048
VOCAB, LSTM_HIDDEN = 10000, 256


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before the measured ones")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads: torch.set_num_threads and the OMP/OpenBLAS/MKL "
                        "thread variables (set before torch is imported)")
    p.add_argument("--pool-batches", type=int, default=4,
                   help="distinct pre-generated batches the steps cycle through (default 4)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--seq-len", type=int, default=0,
                   help="tokens per sample of a transformer (default 0: the model's context)")
    p.add_argument("--optimizer", choices=("auto", "sgd", "adamw"), default="auto",
                   help="auto: AdamW for the transformers, SGD for the others (as dtbench's)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=None,
                   help="AdamW's, on the tensors of 2 or more dimensions (default 0.1); SGD's "
                        "L2 term (default 0)")
    p.add_argument("--zero-grad", choices=("none", "zero"), default="none",
                   help="optimizer.zero_grad(set_to_none=True) ('none', PyTorch 2.x default and "
                        "the faster one) or set_to_none=False ('zero', fills the gradients with 0)")
    p.add_argument("--no-mkldnn", action="store_true",
                   help="disable oneDNN (torch.backends.mkldnn) so convolutions take the "
                        "im2col + BLAS path, like dtbench")
    p.add_argument("--precision", choices=("fp32", "tf32", "default", "bf16", "fp16"),
                   default="fp32",
                   help="as dtbench's --precision: tf32 allows TF32 in cuDNN and cuBLAS (GPU); "
                        "default: PyTorch's own TF32 settings (GPU); bf16/fp16 run forward and "
                        "loss under torch.autocast (fp32 master weights), fp16 with "
                        "torch.cuda.amp.GradScaler (GPU)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the network trains (cuda: the current GPU)")
    p.add_argument("--data", choices=("pageable", "pinned", "device"), default="pageable",
                   help="GPU: where the batch comes from (see the module's help)")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark = True (GPU)")
    p.add_argument("--channels-last", action="store_true",
                   help="the network and 4-D inputs in torch.channels_last")
    p.add_argument("--no-times", action="store_true",
                   help="leave the per-step times list out of the JSON")
    a = p.parse_args(argv)
    if a.batch < 1 or a.iters < 1 or a.warmup < 0 or a.threads < 1 or a.pool_batches < 1:
        p.error("batch, iters, threads, pool-batches must be >= 1 and warmup >= 0")
    if a.seq_len < 0 or (a.seq_len and a.model not in TRANSFORMERS):
        p.error("--seq-len: a transformer's, >= 0")
    if a.optimizer == "auto":
        a.optimizer = "adamw" if a.model in TRANSFORMERS else "sgd"
    if a.weight_decay is None:
        a.weight_decay = 0.1 if a.optimizer == "adamw" else 0.0
    return a


ARGS = parse_args()

# Thread pools read these when their library is loaded: set them before importing torch.
# (torch.set_num_threads alone does not reach OpenBLAS's own pthread pool in Debian's build.)
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)

import torch                      # noqa: E402
import torch.nn as nn             # noqa: E402
import torch.nn.functional as F   # noqa: E402


class Inception(nn.Module):
    """GoogLeNet's module (Szegedy et al. 2014, Table 1): four branches, ReLU after every
    convolution, channel concatenation; the same rows as dtbench's INCEPTION."""

    def __init__(self, c_in, n1, n3r, n3, n5r, n5, pool_proj):
        super().__init__()
        relu = lambda: nn.ReLU(inplace=True)  # noqa: E731
        self.b1 = nn.Sequential(nn.Conv2d(c_in, n1, 1), relu())
        self.b2 = nn.Sequential(nn.Conv2d(c_in, n3r, 1), relu(), nn.Conv2d(n3r, n3, 3, padding=1),
                                relu())
        self.b3 = nn.Sequential(nn.Conv2d(c_in, n5r, 1), relu(), nn.Conv2d(n5r, n5, 5, padding=2),
                                relu())
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), nn.Conv2d(c_in, pool_proj, 1),
                                relu())

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class Bottleneck(nn.Module):
    """ResNet-50's block as in torchvision (stride in the 3x3 convolution)."""

    def __init__(self, c_in, mid, out, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out))
        self.down = None
        if stride != 1 or c_in != out:
            self.down = nn.Sequential(nn.Conv2d(c_in, out, 1, stride, bias=False),
                                      nn.BatchNorm2d(out))

    def forward(self, x):
        shortcut = x if self.down is None else self.down(x)
        return torch.relu(self.body(x) + shortcut)


class LanguageModel(nn.Module):
    """DLBench's LSTM: embedding, two LSTM layers of 256, a projection to the vocabulary at
    every position; the loss is the mean cross-entropy over all positions."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, LSTM_HIDDEN)
        self.lstm = nn.LSTM(LSTM_HIDDEN, LSTM_HIDDEN, num_layers=2, batch_first=True)
        self.fc = nn.Linear(LSTM_HIDDEN, VOCAB)

    def forward(self, tokens):                      # tokens [n, seq]
        h, _ = self.lstm(self.embedding(tokens))    # [n, seq, 256]
        return self.fc(h).reshape(-1, VOCAB)        # [n * seq, vocab]


def build_zoo(model):
    """The model-zoo networks, row for row as in dtbench's src/model/models.c."""
    relu = lambda: nn.ReLU(inplace=True)  # noqa: E731
    if model == "alexnet":  # torchvision's AlexNet with the 2012 paper's LRN after conv1, conv2
        return nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), relu(), nn.LocalResponseNorm(5, 1e-4, 0.75, 2.0),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), relu(), nn.LocalResponseNorm(5, 1e-4, 0.75, 2.0),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), relu(), nn.Conv2d(384, 256, 3, padding=1), relu(),
            nn.Conv2d(256, 256, 3, padding=1), relu(), nn.MaxPool2d(3, 2), nn.Flatten(),
            nn.Dropout(0.5), nn.Linear(9216, 4096), relu(),
            nn.Dropout(0.5), nn.Linear(4096, 4096), relu(), nn.Linear(4096, 1000),
        ), (3, 224, 224), 1000
    if model == "vgg16":  # configuration D
        layers, c = [], 3
        for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                  512, 512, 512, "M"):
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), relu()]
                c = v
        layers += [nn.Flatten(), nn.Linear(25088, 4096), relu(), nn.Dropout(0.5),
                   nn.Linear(4096, 4096), relu(), nn.Dropout(0.5), nn.Linear(4096, 1000)]
        return nn.Sequential(*layers), (3, 224, 224), 1000
    if model == "googlenet":  # no auxiliary heads; pools 3/2 with padding 1 as in dtbench
        return nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3), relu(), nn.MaxPool2d(3, 2, 1),
            nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0),
            nn.Conv2d(64, 64, 1), relu(), nn.Conv2d(64, 192, 3, padding=1), relu(),
            nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0), nn.MaxPool2d(3, 2, 1),
            Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, 2, 1),
            Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
            Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
            Inception(528, 256, 160, 320, 32, 128, 128), nn.MaxPool2d(3, 2, 1),
            Inception(832, 256, 160, 320, 32, 128, 128),
            Inception(832, 384, 192, 384, 48, 128, 128),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.4), nn.Linear(1024, 1000),
        ), (3, 224, 224), 1000
    if model == "resnet50":
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), relu(),
                  nn.MaxPool2d(3, 2, 1)]
        c = 64
        for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for b in range(blocks):
                layers.append(Bottleneck(c, mid, mid * 4, stride if b == 0 else 1))
                c = mid * 4
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
        return nn.Sequential(*layers), (3, 224, 224), 1000
    seq = {"lstm32": 32, "lstm64": 64}[model]
    return LanguageModel(), (seq,), VOCAB


def build_gpt(model, seq):
    """tests/torch_gpt.py's GPT (the tests folder beside this one); (net, (seq,), vocabulary)."""
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from torch_gpt import GPT, SHAPES
    shape = GPT_MEDIUM if model == "gpt2-medium" else SHAPES[model]
    seq = seq or shape[3]
    if seq > shape[3]:
        sys.exit(f"torch_peer: --seq-len {seq} is beyond {model}'s context {shape[3]}")
    net = GPT(*shape)
    for m in net.modules():  # GPT-2's initialisation, as nanoGPT's (the loss starts near ln V)
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)
    return net, (seq,), shape[4]


def make_optimizer(a, net):
    """SGD (momentum, L2 weight decay) or AdamW with nanoGPT's groups (decay on the tensors of 2
    or more dimensions), fused on a GPU where this PyTorch has it, as nanoGPT takes it."""
    if a.optimizer == "sgd":
        return torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum,
                               weight_decay=a.weight_decay)
    params = list(net.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {}
    if a.device == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        extra["fused"] = True
    return torch.optim.AdamW(groups, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, **extra)


def build(model, seq=0):
    if model in TRANSFORMERS:
        return build_gpt(model, seq)
    if model not in ("lenet", "fcn5", "fcn8"):
        return build_zoo(model)
    if model == "lenet":
        # Caffe examples/mnist/lenet_train_test.prototxt: no ReLU after the convolutions.
        return nn.Sequential(
            nn.Conv2d(1, 20, kernel_size=5, stride=1, padding=0),   # 1x28x28 -> 20x24x24
            nn.MaxPool2d(kernel_size=2, stride=2),                  # -> 20x12x12
            nn.Conv2d(20, 50, kernel_size=5, stride=1, padding=0),  # -> 50x8x8
            nn.MaxPool2d(kernel_size=2, stride=2),                  # -> 50x4x4
            nn.Flatten(),                                           # -> 800
            nn.Linear(800, 500),
            nn.ReLU(inplace=True),
            nn.Linear(500, 10),
        ), (1, 28, 28), 10
    hidden = {"fcn5": 3, "fcn8": 6}[model]
    layers, d = [], FCN_DIM
    for _ in range(hidden):
        layers += [nn.Linear(d, FCN_HIDDEN), nn.ReLU(inplace=True)]
        d = FCN_HIDDEN
    layers.append(nn.Linear(d, FCN_DIM))                            # no ReLU on the output
    return nn.Sequential(*layers), (FCN_DIM,), FCN_DIM


def percentile(sorted_xs, q):
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    n = len(sorted_xs)
    if n == 1:
        return sorted_xs[0]
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def blas_info():
    """The BLAS shared object actually mapped into this process, and its thread count."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path).lower()
                if any(k in base for k in ("blas", "mkl_rt", "libmkl", "blis")) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    ob = {}
    for path in libs:
        if "openblas" in os.path.basename(path).lower():
            try:
                import ctypes
                lib = ctypes.CDLL(path)
                ob["threads"] = int(lib.openblas_get_num_threads())
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                # the kernel set OpenBLAS picked for this CPU (DYNAMIC_ARCH builds fall back to
                # Prescott on CPUs they do not know; OPENBLAS_CORETYPE overrides it)
                ob["corename"] = lib.openblas_get_corename().decode()
                ob["config"] = lib.openblas_get_config().decode()
            except (OSError, AttributeError):
                pass
            break
    return libs, ob


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    if a.no_mkldnn:
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(a.seed)

    dev = torch.device(a.device)
    cuda = a.device == "cuda"
    if a.precision in ("tf32", "default", "fp16") and not cuda:
        sys.exit(f"torch_peer: --precision {a.precision} is a GPU mode (as in dtbench)")
    if a.data != "pageable" and not cuda:
        sys.exit(f"torch_peer: --data {a.data} needs --device cuda")
    if cuda:
        if a.precision in ("fp32", "tf32"):
            torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        if a.precision != "default":
            torch.backends.cudnn.benchmark = a.cudnn_benchmark
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    net, in_shape, classes = build(a.model, a.seq_len)
    net = net.float().to(dev).train()
    layout = torch.channels_last if a.channels_last else torch.contiguous_format
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
    nparams = sum(p.numel() for p in net.parameters())
    assert nparams == EXPECTED_PARAMS[a.model], (a.model, nparams, EXPECTED_PARAMS[a.model])

    loss_fn = nn.CrossEntropyLoss()
    opt = make_optimizer(a, net)
    set_to_none = a.zero_grad == "none"

    # Synthetic data, generated once before the run (not timed): a pool of samples that the
    # steps cycle through. Inputs uniform in [0,1), labels uniform over the classes.
    pool_n = a.pool_batches * a.batch
    if a.model.startswith("lstm"):  # token ids, and the next token at every position
        seq = in_shape[0]
        pool_x = torch.randint(0, VOCAB, (pool_n, seq), dtype=torch.int64)
        pool_y = torch.randint(0, VOCAB, (pool_n * seq,), dtype=torch.int64)
        labels_per_sample = seq
    elif a.model in TRANSFORMERS:  # windows of seq + 1 tokens: the labels are the next tokens
        seq = in_shape[0]
        tokens = torch.randint(0, classes, (pool_n, seq + 1), dtype=torch.int64)
        pool_x, pool_y = tokens[:, :-1].contiguous(), tokens[:, 1:].reshape(-1)
        labels_per_sample = seq
    else:
        pool_x = torch.rand((pool_n,) + in_shape, dtype=torch.float32)
        pool_y = torch.randint(0, classes, (pool_n,), dtype=torch.int64)
        labels_per_sample = 1
    if pool_x.dim() == 4:
        pool_x = pool_x.contiguous(memory_format=layout)
    if a.data == "pinned":
        pool_x, pool_y = pool_x.pin_memory(), pool_y.pin_memory()
    elif a.data == "device":
        pool_x, pool_y = pool_x.to(dev), pool_y.to(dev)
    copy_stream = torch.cuda.Stream() if a.data == "pinned" else None

    def batch_of(it):
        s = (it % a.pool_batches) * a.batch
        return pool_x[s:s + a.batch], pool_y[s * labels_per_sample:(s + a.batch) * labels_per_sample]

    def prefetch(it):
        """Queues batch it's copy on the side stream; (x, y, the copy's event)."""
        x, y = batch_of(it)
        with torch.cuda.stream(copy_stream):
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(copy_stream)
        return x, y, ev

    total = a.warmup + a.iters
    times, losses = [], []
    ahead = prefetch(0) if copy_stream else None
    for it in range(total):
        sync()
        t0 = time.perf_counter()
        # fetch the batch: a copy into fresh tensors, like loading a batch into an input buffer
        # (on the GPU: the copy to the device, or the wait for the one queued a step ago)
        if copy_stream:
            x, y, ev = ahead
            torch.cuda.current_stream().wait_event(ev)
            x.record_stream(torch.cuda.current_stream())
            y.record_stream(torch.cuda.current_stream())
        else:
            x, y = batch_of(it)
            if a.data == "pageable":
                x, y = (x.to(dev), y.to(dev)) if cuda else (x.clone(), y.clone())
        opt.zero_grad(set_to_none=set_to_none)
        with (torch.autocast(a.device, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()):
            out = net(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]) if out.dim() == 3 else out, y)
        if scaler:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if copy_stream and it + 1 < total:  # the next batch copies while this step computes
            ahead = prefetch(it + 1)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sync()
        t1 = time.perf_counter()
        losses.append(loss.detach())
        if it >= a.warmup:
            times.append(t1 - t0)

    losses = [float(l) for l in losses]
    if any(l != l for l in losses):
        print("torch_peer: warning: NaN loss", file=sys.stderr)
    st = sorted(times)
    libs, ob = blas_info()
    cfg = torch.__config__.show().strip().splitlines()
    blas_line = next((l.strip() for l in cfg if "BLAS_INFO" in l), "")
    blas_setting = ""
    for part in blas_line.split(","):
        if "BLAS_INFO" in part and "LAPACK" not in part:
            blas_setting = part.split(":", 1)[-1].strip()
            break
    result = {
        "tool": "torch_peer",
        "model": a.model,
        "threads": a.threads,
        "batch": a.batch,
        "seq_len": in_shape[0] if labels_per_sample > 1 else None,
        "tokens_per_step": a.batch * labels_per_sample if labels_per_sample > 1 else None,
        "optimizer": a.optimizer,
        "attention": None if a.model not in TRANSFORMERS else (
            "scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention")
            else "masked softmax"),
        "adamw_fused": bool(opt.defaults.get("fused")) if a.optimizer == "adamw" else None,
        "iters": a.iters,
        "warmup": a.warmup,
        "param_count": nparams,
        "median_s": percentile(st, 50),
        "p5_s": percentile(st, 5),
        "p95_s": percentile(st, 95),
        "mean_s": sum(st) / len(st),
        "min_s": st[0],
        "max_s": st[-1],
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "torch_version": torch.__version__,
        # the build summary lines (compiler, oneDNN, OpenMP, CPU capability), without the long
        # compiler-flag line
        "torch_config": "; ".join(l.strip().lstrip("- ") for l in cfg[1:]
                                  if l.strip() and "Build settings" not in l),
        "torch_blas_setting": blas_setting,
        "blas_libraries": libs,
        "openblas_threads": ob.get("threads"),
        "openblas_corename": ob.get("corename"),
        "openblas_config": ob.get("config"),
        "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
        "torch_threads": torch.get_num_threads(),
        "mkldnn_enabled": bool(torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()),
        "zero_grad_set_to_none": set_to_none,
        "device": a.device,
        "precision": a.precision,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "cuda_version": torch.version.cuda if cuda else None,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None,
        "tf32": (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
                if cuda else None,
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark) if cuda else None,
        "channels_last": a.channels_last,
        "data": a.data,
        "python": sys.executable,
        "step_includes": ({"pageable": "batch copy from pre-generated pool"
                           + (" to the GPU" if cuda else ""),
                           "pinned": "wait for the batch copied to the GPU during the previous "
                                     "step from page-locked memory",
                           "device": "batch slice of a pool on the GPU"}[a.data]
                          + " + zero_grad + forward + CrossEntropyLoss + backward + "
                          + ("AdamW" if a.optimizer == "adamw" else "SGD(momentum)") + " step"
                          + (", between torch.cuda.synchronize()" if cuda else "")),
    }
    if not a.no_times:
        result["step_times_s"] = times
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
