# test_reliability_tag.sh - stored strings are never cut, and the analysis reads any bytes a user
# can put into a --tag: the configuration was cut at 1023 bytes, mid-character, and a
# long or non-UTF-8 tag crashed `dtbench-analyze report` and `compare --plot` with a traceback.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
S="--dataset synthetic --batch 4 --iters 4 --warmup 1"

long=$("$PYTHON" -c "print('dtbench-é€-' * 300, end='')") # 4500 bytes of 1- to 3-byte characters
bad=$(printf 'run-\xff\xfe-latin1-caf\xe9-%s' "$(printf 'y%.0s' $(seq 1 1500))")
run_np 2 $S --tag "$long" --output long.h5 >/dev/null 2>err.txt || fail "long tag: $(cat err.txt)"
run_np 2 $S --tag "$bad" --output bad.h5 >/dev/null 2>err.txt || fail "non-UTF-8 tag: $(cat err.txt)"
pycheck run tag long.h5 "$long"
pycheck run tag bad.h5 "$bad"
for f in long bad; do
    analyze report $f.h5 -o $f.html >out.txt 2>&1 || fail "report on the $f tag: $(tail -3 out.txt)"
done
analyze compare long.h5 bad.h5 --plot cmp.png >out.txt 2>&1 || fail "compare --plot: $(tail -3 out.txt)"
[ -s cmp.png ] || fail "compare --plot wrote no figure"
pass "report and compare --plot read long and non-UTF-8 tags"
