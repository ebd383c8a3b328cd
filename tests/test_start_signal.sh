#!/bin/bash
# test_start_signal.sh - a stop is never fatal, however early: SIGTERM and SIGUSR1 sent 0, 10, 20,
# 50 and 100 ms after the process was first seen under dtbench's name (a scan of /proc, as pgrep
# does: tests/stop_probe.py), to a process started alone and to both ranks of mpirun -np 2. Each
# run exits 0 and either left no file at all (the stop came during set-up: nothing recorded) or
# closed its file marked stop_reason=signal. The old program, whose handlers came after the CUDA
# libraries' constructors (~170 ms), died of the signal at every one of these delays.
# The program is started as users start it, through the front door (bin/dtbench, src/survival/start.c).
. "$(dirname "$0")/lib.sh"
cd "$WORK"
RUN=(--model lenet --dataset synthetic --batch 8 --iters 1000000 --warmup 1)

n=0
for sig in TERM USR1; do
    for ranks in 0 2; do
        for ms in 0 10 20 50 100; do
            out=$WORK/s-$sig-$ranks-$ms.h5
            res=$(timeout -k 5 150 "$PYTHON" "$TESTS_SRCDIR/stop_probe.py" --signal $sig \
                --ranks $ranks --when exec:$ms -- "$DTBENCH" "${RUN[@]}" --output "$out" 2>"$out.log") ||
                { cat "$out.log"; fail "SIG$sig $ms ms after exec ($ranks ranks): $res"; }
            read -r rc latency _ <<<"$res"
            where=alone; [ $ranks = 0 ] || where="$ranks ranks under mpirun"
            [ "$rc" = rc=0 ] || { cat "$out.log"; fail "SIG$sig $ms ms after exec ($where): $res"; }
            if [ -e "$out" ]; then
                pycheck run marks "$out" --attr finished=1 --attr stop_reason=signal ||
                    { cat "$out.log"; fail "SIG$sig $ms ms after exec ($where): file"; }
                how="file closed, stop_reason=signal"
            else
                grep -q "stopped during set-up (signal): nothing was recorded" "$out.log" ||
                    { cat "$out.log"; fail "SIG$sig $ms ms ($where): no file, and no word of a stop"; }
                [ -z "$(ls -A | grep -F ".$(basename "$out")")" ] || fail "a hidden file was left: $(ls -A)"
                how="stopped during set-up, no file"
            fi
            n=$((n + 1))
            echo "ok: SIG$sig $ms ms after exec, $where: exit 0, $how (${latency#latency_s=} s)"
        done
    done
done
pass "$n early stops, none fatal"
