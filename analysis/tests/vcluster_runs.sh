# Runs dtbench on emulated nodes (tests/vcluster.sh) for analysis/tests/test_predict_vcluster.py and
# test_predict_zero_vcluster.py:
# RUNS is a list of NAME:NODES:RANKS_PER_NODE:BUCKET_MB[:ARGS, + for spaces]; RATE limits each link.
. "$TESTS_SRCDIR/lib.sh"
. "$TESTS_SRCDIR/vcluster.sh"
vc_require tc
vc_nodes_up 4
for n in $VC_NODES; do
    ip -n "$(vc_ns "$n")" link set fe0 txqueuelen 1000
    tc -n "$(vc_ns "$n")" qdisc replace dev fe0 root tbf rate "$RATE" burst 128kb latency 100ms
done
export OMPI_MCA_plm_rsh_agent="$VC/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
run() {
    local name=$1 nodes=$2 per=$3 mb=$4
    shift 4
    local hosts=$(seq -f "n%g:$per" 1 "$nodes" | paste -sd, -)
    vc_on n1 "$MPIRUN" -np $((nodes * per)) --host "$hosts" "$DTBENCH" --model lenet \
        --dataset synthetic --batch $((8 * nodes * per)) --iters "$ITERS" --warmup 3 \
        --bucket-mb "$mb" --flush-every 50 --output "$OUT/$name.h5" "$@" >"$OUT/$name.log" 2>&1 ||
        { cat "$OUT/$name.log"; exit 1; }
}
for spec in $RUNS; do
    IFS=: read -r name nodes per mb extra <<<"$spec"
    run "$name" "$nodes" "$per" "$mb" ${extra//+/ }
done
