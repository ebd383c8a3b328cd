# test_cli.sh - --help lists every option with its default; --dry-run prints the published
# parameter counts; rank 0 alone prints the resolved configuration, once.
. "$(dirname "$0")/lib.sh"

help=$("$DTBENCH" --help)
for opt in model dataset data-dir device exchange batch iters warmup lr momentum weight-decay seed \
    threads bucket-mb ranks-per-node eval-every flush-every output overwrite tag save-model dry-run \
    ps-ranks staleness sync-period straggler straggler-random target-acc \
    parallel stages split microbatches; do
    grep -q -- "--$opt" <<<"$help" || fail "--help does not list --$opt"
done
# Every option line is followed by its help text ending with the default in brackets.
n_opts=$(echo "$help" | grep -c '^  --')
n_defaults=$(echo "$help" | grep -c '\[.*\]$')
[ "$n_defaults" -ge $((n_opts - 2)) ] || fail "--help: $n_opts options but $n_defaults defaults"
grep -q '\[lenet\]' <<<"$help" || fail "--help does not show the default model"
pass "--help lists $n_opts options with defaults"

# the version and the commit it was configured from (gpu_pack.sh's copies pass it in
# DTBENCH_GIT_COMMIT; a tarball build without git says unknown)
grep -qE '^dtbench [0-9][0-9.]* \(([0-9a-f]{7,40}|unknown)\)$' <<<"$("$DTBENCH" --version)" ||
    fail "--version: $("$DTBENCH" --version)"
# --help and --version never start MPI: MPI_Init (a singleton's orted) makes its session folder
# under OMPI_MCA_orte_tmpdir_base (lib.sh: $WORK/ompi); also on the ranks of mpirun, where only
# rank 0 prints.
mkdir -p "$WORK/info" && rm -rf "$WORK/ompi"/*
for a in --version --help "--batch 8 --version"; do
    # shellcheck disable=SC2086 # the options split at spaces
    OMPI_MCA_orte_tmpdir_base="$WORK/info" "$DTBENCH" $a >/dev/null || fail "$a: exit $?"
    [ -z "$(ls -A "$WORK/info")" ] || fail "$a started MPI: $(ls "$WORK/info")"
done
n=$(run_np 2 --version | grep -c '^dtbench ')
[ "$n" = 1 ] || fail "mpirun -np 2 dtbench --version printed $n version lines"
pass "--help and --version answer without starting MPI (rank 0 alone prints)"

out=$(run_np 1 --model lenet --dry-run)
grep -q 'total parameters: 431080 ' <<<"$out" || fail "lenet dry-run: $out"
grep -q 'conv1 .*\[20,24,24\]' <<<"$out" || fail "lenet conv1 shape"
out=$(run_np 1 --model fcn5 --dataset synthetic --dry-run)
grep -q 'total parameters: 117997696 ' <<<"$out" || fail "fcn5 dry-run"
out=$(run_np 1 --model fcn8 --dataset synthetic --dry-run)
grep -q 'total parameters: 130586752 ' <<<"$out" || fail "fcn8 dry-run"
[ ! -e dtbench.h5 ] || fail "--dry-run created an output file"
pass "dry-run parameter counts"

out=$(run_np 2 --dataset synthetic --iters 2 --warmup 1 --batch 8 --output "$WORK/c.h5")
[ "$(echo "$out" | grep -c '^configuration:')" = 1 ] || fail "configuration printed $(echo "$out" | grep -c '^configuration:') times"
grep -q '^  batch  *8$' <<<"$out" || fail "resolved configuration lacks batch 8: $out"
pass "rank 0 prints the resolved configuration once"
