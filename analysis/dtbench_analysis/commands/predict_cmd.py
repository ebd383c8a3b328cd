"""``dtbench-analyze predict RUNS... --nodes 32,64,...``: options, the text output and the
figure of the prediction (predict/model.py computes it)."""

from __future__ import annotations

from typing import Dict, List

from .. import jsonout
from ..predict import build
from ..predict.fit import ALGORITHM_HELP, ALGORITHMS, PARAMS
from ..predict.model import DEFAULT_MAX_ERROR, unusable
from ..predict.shard import ZERO
from ..predict.sim import SLOW_FACTOR, STRATEGIES
from ..units import ms as _ms
from ..units import num
from . import common

def _fmt_param(name: str, value, sd, beta_known: bool = False) -> str:
    if value is None:
        return "0 (not separable, see the notes)" if beta_known else "not determined"
    if name.startswith("alpha"):
        return f"{value * 1e6:.2f} us (sd {sd * 1e6:.2f})"
    if value <= 0:
        return "0 (no measurable cost)"
    bw = 1.0 / value / 1e6
    return f"{value * 1e9:.4f} s/GB = {bw:.1f} MB/s (sd {sd * 1e9:.4f} s/GB)"


def format_text(result: Dict, simulate_mode: bool) -> str:
    lines = [f"predict: {len(result['runs'])} runs; model fitted to all of them, validated by "
             f"holding out each strategy's largest measured scale"]
    lines += [f"   left out: {x['file']}: {x['why']}" for x in result.get("left_out", [])]
    for r in result["runs"]:
        lines.append(f"   {r['strategy']:6s} {r['nodes']:4d} nodes {r['ranks']:5d} ranks  "
                     f"batch/rank {r['batch_per_rank']:4d}  iteration {_ms(r['iteration_s'])} ms  "
                     f"compute {_ms(r['compute_s'])} ms  transfer {_ms(r['transfer_s'])} ms  "
                     + (f"(collectives alone {_ms(r['calibration_s'])} ms)  "
                        if r.get("calibration_s") else "") + r["file"])
    for key, c in result["compute"].items():
        lines.append(f"compute ({key}): c(b) = {_ms(c['c0_s'])} ms + {_ms(c['c1_s_per_sample'])} "
                     f"ms/sample x b (per sample p5..p95 {_ms(c['per_sample_p5_p95_s'][0])}.."
                     f"{_ms(c['per_sample_p5_p95_s'][1])} ms; batches {c['batches']}; rank "
                     f"factor p95 {c['rank_factor_p95']:.3f}, iteration factor p95 "
                     f"{c['iteration_factor_p95']:.3f}, P(iteration > {SLOW_FACTOR}x median) "
                     f"{c['p_slow_iteration']:.4f})")
    for transport, cm in result["comm"].items():
        what = ("every run" if transport == "pooled" else
                f"the runs on the {transport} transport")
        lines.append(f"communication ({what}): algorithm {cm['algorithm']}, {cm['rows']} rows, "
                     f"median |relative residual| {100 * cm['median_abs_rel_residual']:.1f}%")
        for name in PARAMS:
            beta_known = cm["params"][name.replace("alpha", "beta")] is not None
            lines.append(f"   {name:12s} "
                         f"{_fmt_param(name, cm['params'][name], cm['sd'][name] or 0, beta_known)}")
        lines += [f"   note: {n}" for n in cm["notes"]]
    w = result["waits"]
    if w["n"]:
        lines.append(f"waits (measured exchange_wait): median {_ms(w['median_s'])} ms, p95 "
                     f"{_ms(w['p95_s'])} ms over {w['n']} rank-iterations")
    lines.append("validation (fit without the held-out runs, predict them):")
    if not result["validation"]:
        lines.append("   none possible: no strategy measured at two scales; predictions below "
                     "are NOT validated")
    for v in result["validation"]:
        if v["error"] is None:
            lines.append(f"   {v['strategy']} {v['nodes']}x{v['ranks'] // max(1, v['nodes'])}: "
                         f"not predicted ({v['why']})")
            continue
        pi = v["predicted"]["iteration_s"]
        te, ce = v.get("transfer_error"), v.get("calibration_error")
        lines.append(f"   {v['strategy']} {v['nodes']} nodes {v['ranks']} ranks "
                     f"(fitted on {v['fitted_on']} runs): measured {_ms(v['measured_s'])} ms, "
                     f"predicted {_ms(pi['value'])} ms [{_ms(pi['lo'])}, {_ms(pi['hi'])}]: "
                     f"error {100 * v['error']:+.1f}%"
                     + (f" (exchange transfer {100 * te:+.1f}%" if te is not None else "")
                     + (f"; collectives alone {100 * ce:+.1f}%" if ce is not None else "")
                     + (")" if te is not None else "")
                     + "".join(f"; {k} {100 * e:+.1f}%"
                               for k, e in (v.get("collective_errors") or {}).items()))
    for t in result.get("tensor") or []:
        lines.append(f"   tensor group of {t['tp']} ({t['calls']:.0f} allreduces of "
                     f"{t['bytes_per_call'] / 1e3:.1f} kB per iteration): measured "
                     f"{_ms(t['measured_s'])} ms, predicted "
                     + (f"{_ms(t['predicted_s'])} ms: error {100 * t['error']:+.1f}%"
                        if t["error"] is not None else "-: intra-node terms unknown")
                     + f"  {t['file']}")
    if result["worst_error"] is not None:
        lines.append(f"   worst |error| {100 * result['worst_error']:.1f}% (bound --max-error "
                     f"{100 * result['max_error']:.0f}%)")
    ref = result["reference"]
    settings = f"{ref['settings']}, " if ref["settings"] else ""
    lines.append(f"predictions: {ref['per_node']} ranks per node, {settings}gradient "
                 f"{ref['grad_bytes'] / 1e6:.3f} MB in buckets of {ref['bucket_bytes'] / 2**20:g} "
                 f"MiB; speedup against the model at the scale of {result['base']['file']} "
                 f"({result['base']['ranks']} ranks, batch {result['base']['batch_per_rank']} "
                 f"per rank: {num(result['base']['samples_per_s'], '.1f')} samples/s; measured "
                 f"{num(result['base']['measured_samples_per_s'], '.1f')}); "
                 f"intervals 90 % (parameter draws), widened "
                 f"by the worst held-out error; * = strategy not measured (from the shared fit)")
    lines.append(f"   {'strategy':8s} {'nodes':>5s} {'ranks':>6s} {'b/rank':>6s}  "
                 f"{'time/iter ms [90% PI]':32s} {'exch.':>6s} {'samples/s [90% PI]':30s} "
                 f"{'speedup':>8s} {'effic.':>6s}")
    for p in result["predictions"]:
        name = p["strategy"] + ("" if p["measured_strategy"] else "*")
        if p["prediction"] is None:
            lines.append(f"   {name:8s} {p['nodes']:5d} {p['ranks']:6d} {p['batch_per_rank']:6d}  "
                         f"n/a: {p['why']}")
            continue
        it, tp = p["prediction"]["iteration_s"], p["prediction"]["samples_per_s"]
        span = f"{_ms(it['value'])} [{_ms(it['lo'])}, {_ms(it['hi'])}]"
        tspan = f"{tp['value']:.1f} [{tp['lo']:.1f}, {tp['hi']:.1f}]"
        sp, eff = p.get("speedup"), p.get("efficiency")
        sp_s = f"{sp:.3g}" if sp else "n/a"
        eff_s = f"{eff:.3g}" if eff else "n/a"
        lines.append(f"   {name:8s} {p['nodes']:5d} {p['ranks']:6d} {p['batch_per_rank']:6d}  "
                     f"{span:32s} {100 * p['prediction']['exchange_share']:5.1f}% {tspan:30s} "
                     f"{sp_s:>8s} {eff_s:>6s}")
    if simulate_mode:
        lines += simulation_lines(result)
    lines.append("assumptions: " + "; ".join(result["assumptions"]))
    return "\n".join(lines)


def simulation_lines(result: Dict) -> List[str]:
    lines = [f"simulation: replaying the fitted rank and iteration factors over every rank "
             f"(slow = compute > {SLOW_FACTOR}x median); slowdown = median compute of what "
             f"an iteration waits for / median compute of a rank",
             f"   {'strategy':8s} {'nodes':>5s} {'ranks':>6s} {'P(rank-iter slow)':>18s} "
             f"{'P(some rank slow in an iteration)':>34s}  {'who waits for it':24s} "
             f"{'slowdown':>8s}"]
    who = {"sync": "every rank", "hier": "every rank", "ssp": "every rank, S iters later",
           "async": "nobody", "mixed": "its node's ranks"}
    for p in result["predictions"]:
        pr = p["prediction"]
        if pr is None:
            continue
        lines.append(f"   {p['strategy']:8s} {p['nodes']:5d} {p['ranks']:6d} "
                     f"{pr['p_slow_rank_iteration']:18.4f} "
                     f"{pr['p_iteration_has_slow_rank']:34.4f}  {who[p['strategy']]:24s} "
                     f"{pr['straggler_slowdown']:8.3f}")
    return lines


def _int_list(text: str) -> List[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise ValueError
    return values


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="fit a performance model to the runs and predict larger scales",
        description="Fit compute, communication (alpha-beta per level) and straggler models to "
                    "measured runs, validate on the largest measured scale, and predict "
                    "iteration time, exchange share, speedup and efficiency of sync, hier, ssp, "
                    "async and mixed at the requested node counts.")
    common.add_inputs(p)
    p.add_argument("--nodes", required=True, metavar="N,N,...",
                   help="node counts to predict, e.g. 32,64,128,256,512,1024")
    p.add_argument("--strategies", default=",".join(STRATEGIES), metavar="S,S,...",
                   help=f"strategies to predict, of {','.join(STRATEGIES + ZERO)} "
                        f"[{','.join(STRATEGIES)}]")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="auto",
                   help="allreduce algorithm of the communication model: "
                        + "; ".join(f"{k}: {v}" for k, v in ALGORITHM_HELP.items())
                        + "; auto: what each run did: with Open MPI, tuned for blocking "
                          "exchanges (sync, hier, mixed without --overlap; calibrations), tree "
                          "for MPI_Iallreduce (--overlap, ssp); rabenseifner with other "
                          "libraries [auto]")
    p.add_argument("--ranks-per-node", type=int, metavar="L",
                   help="ranks per node of the predictions [as the largest measured run]")
    batch = p.add_mutually_exclusive_group()
    batch.add_argument("--batch-per-rank", type=int, metavar="B",
                       help="per-rank batch of the predictions (weak scaling) [as the largest "
                            "measured run]")
    batch.add_argument("--batch-global", type=int, metavar="G",
                       help="global batch of the predictions (strong scaling: G / ranks each)")
    p.add_argument("--max-error", type=float, default=DEFAULT_MAX_ERROR, metavar="E",
                   help="refuse to extrapolate when the held-out relative error exceeds E "
                        f"[{DEFAULT_MAX_ERROR}]")
    p.add_argument("--force", action="store_true",
                   help="predict even when the held-out error exceeds --max-error")
    p.add_argument("--simulate", action="store_true",
                   help="also print what stragglers do at each scale (replay of the fitted "
                        "rank and iteration distributions)")
    p.add_argument("--shared-cores", type=int, metavar="C",
                   help="every rank of the runs and of the predictions shares the same C cores "
                        "(nodes emulated on one machine): compute is fitted per rank alone, "
                        "divided by max(1, ranks x threads / C), and predicted times that "
                        "factor at each scale [ranks on nodes of their own]")
    p.add_argument("--seed", type=int, default=1, help="seed of the replay [1]")
    common.add_plot(p, "measured points, the fitted curve and the predictions with intervals")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    try:
        nodes = _int_list(args.nodes)
    except ValueError:
        report_error(f"--nodes {args.nodes}: accepted: comma-separated node counts >= 1, "
                     f"e.g. 32,64,128")
        return 2
    strategies = [s for s in args.strategies.split(",") if s]
    bad = [s for s in strategies if s not in STRATEGIES + ZERO]
    if bad or not strategies:
        report_error(f"--strategies {args.strategies}: accepted: comma-separated, of "
                     f"{','.join(STRATEGIES + ZERO)}")
        return 2
    for opt, value in (("--ranks-per-node", args.ranks_per_node),
                       ("--batch-per-rank", args.batch_per_rank),
                       ("--batch-global", args.batch_global),
                       ("--shared-cores", args.shared_cores)):
        if value is not None and value < 1:
            report_error(f"{opt} {value}: accepted: an integer >= 1")
            return 2
    if not 0 < args.max_error < 10:
        report_error(f"--max-error {args.max_error}: accepted: a relative error in (0, 10), "
                     f"e.g. 0.25")
        return 2
    if not common.plot_ok(args, report_error):
        return 2
    runs, status = common.load(args, report_error)
    if status:
        return status
    left_out = [(r, unusable(r)) for r in runs if unusable(r)]
    runs = [r for r in runs if r not in [x for x, _ in left_out]]
    if not runs:
        run, why = left_out[0]
        report_error(f"predict: {run.path}: {why} (no run left to fit)")
        return 2
    result = build(runs, nodes, strategies, args.algorithm, args.ranks_per_node,
                   args.batch_per_rank, args.batch_global, args.max_error, args.seed,
                   shared_cores=args.shared_cores,
                   tensor_runs=[r for r, _ in left_out
                                if str(r.attrs.get("parallel") or "") == "tensor"])
    refuse = result["refused"] and not args.force
    if refuse:
        result["predictions"], result["curve"] = [], []
    result["left_out"] = [{"file": r.path, "why": why} for r, why in left_out]
    if args.json:
        print(jsonout.dumps(result))
    else:
        print(format_text(result, args.simulate))
    if refuse:
        report_error(f"predict: refusing to extrapolate: held-out error "
                     f"{100 * result['worst_error']:.1f}% exceeds --max-error "
                     f"{100 * args.max_error:g}% (--force predicts anyway, intervals widened)")
        return 1
    if args.plot:
        from ..plot.predict_fig import save
        save(result, args.plot)
        print(f"wrote {args.plot}")
    return 0
