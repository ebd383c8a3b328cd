# test_vs_torch_gpt2.sh - gpt2 (124M parameters) against PyTorch, as tests/test_vs_torch.sh checks
# nanogpt-char (the same layer kinds, 6 blocks of width 384): at 16 tokens, 3 SGD steps with
# momentum from dtbench's initial parameters, every loss and the final parameters within
# tests/torch_lib.sh's tolerances of PyTorch's float64 run. Not in make check: with GPT-2's
# vocabulary and 12 blocks of width 768 it writes and compares parameter files of 0.5-1 GB, a
# minute and more of the 2-core machine; scripts/test.sh --long (what CI runs) runs it and counts it
# in the summary line.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/torch_lib.sh"
cd "$WORK"

vs_torch_gpt gpt2-sgd gpt2 16 2 3 sgd 0.01
