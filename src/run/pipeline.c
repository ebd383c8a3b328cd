/* pipeline.c - the layout of model and hybrid parallelism (see pipeline.h): checking the stages
 * and micro-batches against the model and the ranks, choosing the stages, the communicators, and
 * gathering the stages' parameters into one file. The timed loop is the driver's (driver.c). */
#include "pipeline.h"
#include "mpi_check.h"
#include "model_sync.h"
#include "partition.h"
#include "pipeline_p2p.h"
#include "names.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */
#include "fail.h"  /* defines: check_fail */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration -------------------------------------------------------------------------- */

/* --parallel tensor: --tp N (0: every rank) against the model and the ranks; groups of N
 * consecutive ranks, the replicas of a group on the rest. */
static void tensor_layout(Pipeline *p, const Options *opt, const Model *plan, const Topology *topo,
                          int dry_run) {
    const int nranks = topo->nranks, n = opt->tp ? opt->tp : nranks;
    char why[256] = "", sizes[128] = "";
    model_tensor_sizes(plan, 64, sizes, sizeof sizes);
    usage_check_all(sizes[0] || opt->tp,
                    "--parallel: 'tensor' is not accepted with --model %s: %s; expected data, "
                    "model or hybrid",
                    plan->desc->name, model_tensor_problem(plan, 2, why, sizeof why));
    usage_check_all(n >= 2 || !sizes[0],
                    "--tp: %d is not accepted with --parallel tensor%s: a group needs 2 or more "
                    "ranks; expected one of %s",
                    n, opt->tp ? "" : " on 1 rank", sizes);
    usage_check_all(!model_tensor_problem(plan, n, why, sizeof why),
                    "--tp: %d is not accepted with --model %s: %s; expected %s%s", n,
                    plan->desc->name, why,
                    sizes[0] ? "one of " : "--parallel data, model or hybrid", sizes);
    if (dry_run != 1)
        usage_check_all(nranks % n == 0,
                        "--tp: %d is not accepted on %d ranks: the ranks must be a multiple of "
                        "the group (groups x replicas)",
                        n, nranks);
    p->tp = n, p->tp_rank = topo->rank % n;
    p->replicas = nranks % n == 0 ? nranks / n : 1, p->replica = topo->rank / n;
}

/* A tensor group inside one node, as users place it (its allreduces sit on the critical path),
 * unless --tp-across-nodes asks for it. Collective. */
static void check_group_nodes(const Pipeline *p, const Options *opt, const Topology *topo) {
    int span[2] = {topo->node, -topo->node}; /* the group's highest and lowest node */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT, MPI_MAX, p->tp_comm));
    const int first = topo->rank - p->tp_rank;
    usage_check_all(span[0] == -span[1] || opt->tp_across_nodes,
                    "--tp: %d is not accepted on nodes of %d rank%s: the tensor group of ranks "
                    "%d-%d spans nodes %d to %d, and its allreduces, on the critical path, would "
                    "cross the network; give every node a multiple of %d ranks (--ranks-per-node "
                    "groups them on one host), or --tp-across-nodes to measure that",
                    p->tp, topo->local_size, topo->local_size == 1 ? "" : "s", first,
                    first + p->tp - 1, -span[1], span[0], p->tp);
}

void pipeline_setup(Pipeline *p, const Options *opt, ParallelMode mode, const Model *plan,
                    const Topology *topo, int dry_run) {
    memset(p, 0, sizeof *p);
    p->pipe_comm = p->stage_comm = MPI_COMM_NULL;
    const int nranks = topo->nranks, n = plan->nlayers;
    p->mode = mode;
    p->microbatches = opt->microbatches;

    usage_check_all(p->mode == PARALLEL_TENSOR || !options_given(opt, "tp"),
                    "--tp: %d is not accepted with --parallel %s: a tensor group needs "
                    "--parallel tensor",
                    opt->tp, NAME_OF(PARALLEL_NAMES, p->mode));
    usage_check_all(p->mode == PARALLEL_TENSOR || !opt->tp_across_nodes,
                    "--tp-across-nodes: not accepted with --parallel %s: a tensor group needs "
                    "--parallel tensor",
                    NAME_OF(PARALLEL_NAMES, p->mode));
    p->tp = 1, p->tp_comm = MPI_COMM_NULL;
    const int tensor = p->mode == PARALLEL_TENSOR, piped_tensor = tensor && opt->stages > 1;
    if (p->mode == PARALLEL_DATA || (tensor && !piped_tensor)) {
        const char *mode = NAME_OF(PARALLEL_NAMES, p->mode);
        usage_check_all(opt->stages <= 1,
                        "--stages: %d is not accepted with --parallel %s (pipeline stages need "
                        "--parallel model, hybrid, or tensor with --stages 2 or more)",
                        opt->stages, mode);
        usage_check_all(!opt->split[0],
                        "--split: '%s' is not accepted with --parallel %s (it places pipeline "
                        "stages: --parallel model, hybrid, or tensor with --stages)",
                        opt->split, mode);
        usage_check_all(opt->microbatches == 1,
                        "--microbatches: %d is not accepted with --parallel %s (micro-batches "
                        "are pipelined: --parallel model, hybrid, or tensor with --stages)",
                        opt->microbatches, mode);
        p->stages = 1;
        p->replicas = nranks, p->replica = topo->rank;
        if (p->mode == PARALLEL_TENSOR) tensor_layout(p, opt, plan, topo, dry_run);
    } else {
        int K = opt->stages ? opt->stages : (p->mode == PARALLEL_MODEL ? nranks : 2);
        p->stages = K;
        char cuts[400];
        partition_cuts_text(plan, cuts, sizeof cuts);
        int *cut_ok = xcalloc((size_t)n, sizeof(int));
        int ncuts = partition_cuts(plan, cut_ok);
        free(cut_ok);
        usage_check_all(
            K <= ncuts + 1,
            "--stages: %d is not accepted: %s can be split into at most %d stages (cuts "
            "are possible before layers %s)",
            K, plan->desc->name, ncuts + 1, cuts);
        if (dry_run != 1 && p->mode == PARALLEL_MODEL)
            usage_check_all(K == nranks,
                            "--stages: %d is not accepted with --parallel model on %d ranks: it "
                            "runs one stage per rank (--parallel hybrid runs replicas of a "
                            "pipeline)",
                            K, nranks);
        if (dry_run != 1 && p->mode == PARALLEL_HYBRID)
            usage_check_all(nranks % K == 0,
                            "--stages: %d is not accepted with --parallel hybrid on %d ranks: the "
                            "ranks must be a multiple of the stages (replicas x stages)",
                            K, nranks);
        if (tensor) { /* 3D: rank = (replica x K + stage) x tp + tp_rank */
            tensor_layout(p, opt, plan, topo, dry_run);
            const int g = K * p->tp;
            if (dry_run != 1)
                usage_check_all(nranks % g == 0,
                                "--stages: %d is not accepted with --parallel tensor --tp %d on %d "
                                "ranks: the ranks must be a multiple of tp x stages (%d)",
                                K, p->tp, nranks, g);
            p->replicas = nranks % g == 0 ? nranks / g : 1;
            p->stage = (topo->rank / p->tp) % K, p->replica = topo->rank / g;
        } else {
            p->replicas = dry_run == 1 ? (nranks % K == 0 ? nranks / K : 1) : nranks / K;
            p->stage = topo->rank % K, p->replica = topo->rank / K;
        }
    }
    const int K = p->stages, R = p->replicas, M = p->microbatches;
    usage_check_all(M <= P2P_MAX_MICROBATCHES, "--microbatches: %d is not accepted: at most %d", M,
                    P2P_MAX_MICROBATCHES);
    if (p->mode != PARALLEL_DATA) {
        usage_check_all(opt->batch % R == 0,
                        "--batch: %d is not accepted with %d replicas of the pipeline: the global "
                        "batch must be a multiple of the replicas",
                        opt->batch, R);
        usage_check_all((opt->batch / R) % M == 0,
                        "--microbatches: %d is not accepted: it must divide the batch of each "
                        "replica (%d = --batch %d / %d replica(s))",
                        M, opt->batch / R, opt->batch, R);
    }

    p->first = xcalloc((size_t)K + 1, sizeof(int));
    char err[1024] = "";
    int ok = 1;
    if (opt->split[0])
        ok = partition_parse(plan, opt->split, K, p->first, err, sizeof err) == 0;
    else if (K == 1)
        p->first[0] = 0, p->first[1] = n;
    else
        ok = partition_balance(plan, K, p->first) == 0;
    usage_check_all(ok, "%s", err);
    size_t used = 0;
    for (int s = 0; s < K && used < sizeof p->split_text; s++)
        used += (size_t)snprintf(p->split_text + used, sizeof p->split_text - used,
                                 s ? ",%d" : "%d", p->first[s]);

    if (dry_run) return;
    if (p->mode == PARALLEL_DATA) {
        p->stage_comm = MPI_COMM_WORLD;
        return;
    }
    const int N = p->tp, t = p->tp_rank; /* 1 and 0 without a tensor group */
    if (tensor) { /* the group: the ranks of one stage of one replica */
        MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->replica * K + p->stage, t, &p->tp_comm));
        MPI_CHECK(MPI_Comm_set_errhandler(p->tp_comm, MPI_ERRORS_RETURN));
        check_group_nodes(p, opt, topo);
    }
    /* a replica's stages (of one group rank) */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->replica * N + t, p->stage, &p->pipe_comm));
    MPI_CHECK(MPI_Comm_set_errhandler(p->pipe_comm, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->stage * N + t, p->replica, &p->stage_comm));
    MPI_CHECK(MPI_Comm_set_errhandler(p->stage_comm, MPI_ERRORS_RETURN));
}

void pipeline_free(Pipeline *p) {
    if (p->pipe_comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&p->pipe_comm));
    if (p->tp_comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&p->tp_comm));
    if (p->stage_comm != MPI_COMM_NULL && p->stage_comm != MPI_COMM_WORLD)
        MPI_CHECK(MPI_Comm_free(&p->stage_comm));
    free(p->first);
    memset(p, 0, sizeof *p);
}

void pipeline_print(const Pipeline *p, const Model *plan, FILE *out) {
    double total = model_flops_per_sample(plan);
    if (p->mode == PARALLEL_TENSOR) {
        fprintf(out,
                "tensor: groups of %d ranks x %d stage(s) x %d replica(s) (%d ranks); the "
                "blocks' projections split over each group, the rest replicated\n",
                p->tp, p->stages, p->replicas, p->tp * p->stages * p->replicas);
        if (p->stages == 1) return;
    }
    fprintf(out,
            "pipeline: %d stages x %d replicas (%d ranks), %d micro-batches per replica batch\n",
            p->stages, p->replicas, p->stages * p->replicas, p->microbatches);
    for (int s = 0; s < p->stages; s++) {
        int a = p->first[s], b = p->first[s + 1];
        size_t params = 0;
        for (int i = a; i < b; i++)
            params += plan->layers[i].nparams;
        double f = partition_flops(plan, a, b);
        fprintf(out, "  stage %d: layers %d-%d (%s .. %s), %zu parameters, %.1f%% of the FLOPs\n",
                s, a, b - 1, plan->layers[a].d.name, plan->layers[b - 1].d.name, params,
                total > 0 ? 100.0 * f / total : 0.0);
    }
}

/* ---- parameters --------------------------------------------------------- */

/* Replica 0 of --parallel tensor: each stage's group gathers its slices to its rank 0, which
 * assembles the stage's unsplit part after checking that the replicated rows agree (they are
 * never averaged: the same inputs and the same sums give the same values on every rank); the
 * stages' group ranks 0 then gather the parts to rank 0, which writes the unsplit model. */
static int save_tensor(const Pipeline *p, const Model *m, const char *path) {
    const int n = p->tp, K = p->stages, count = (int)m->nparams;
    const size_t part_count = model_tensor_whole_count(m, m->first, m->last);
    float *mine = xmalloc((m->nparams + 1) * sizeof(float)), *all = NULL, *part = NULL;
    m->be->download(m->ctx, mine, m->params, m->nparams * sizeof(float));
    if (p->tp_rank == 0) all = xmalloc((size_t)n * m->nparams * sizeof(float) + 1);
    MPI_CHECK(MPI_Gather(mine, count, MPI_FLOAT, all, count, MPI_FLOAT, 0, p->tp_comm));
    free(mine);
    if (p->tp_rank != 0) return 0;
    const float **ranks = xcalloc((size_t)n, sizeof *ranks);
    for (int r = 0; r < n; r++)
        ranks[r] = all + (size_t)r * m->nparams;
    part = xmalloc((part_count + 1) * sizeof(float));
    int bad = model_tensor_gather(m, ranks, part);
    if (bad >= 0)
        check_fail(__FILE__, __LINE__, "tensor group: replicated parameters differ",
                   m->layers[bad].d.name);
    free(ranks), free(all);
    float *whole = part;
    if (K > 1) { /* the stages' parts, in layer order */
        int *counts = NULL, *displs = NULL;
        whole = NULL;
        if (p->stage == 0) {
            counts = xcalloc((size_t)K, sizeof(int)), displs = xcalloc((size_t)K, sizeof(int));
            whole = xmalloc((m->tp.whole_params + 1) * sizeof(float));
            for (int s = 0; s < K; s++) {
                displs[s] = (int)model_tensor_whole_count(m, 0, p->first[s]);
                counts[s] = (int)model_tensor_whole_count(m, p->first[s], p->first[s + 1]);
            }
        }
        MPI_CHECK(MPI_Gatherv(part, (int)part_count, MPI_FLOAT, whole, counts, displs, MPI_FLOAT, 0,
                              p->pipe_comm));
        free(part), free(counts), free(displs);
    }
    int rc = 0;
    if (p->stage == 0) {
        Model unsplit = *m; /* the file's header: the whole model's count */
        unsplit.total_params = m->tp.whole_params;
        rc = model_save_params(&unsplit, whole, path);
    }
    free(whole);
    return rc;
}

int pipeline_save_model(const Pipeline *p, const Model *m, const char *path) {
    if (p->mode == PARALLEL_TENSOR) return p->replica == 0 ? save_tensor(p, m, path) : 0;
    if (p->mode == PARALLEL_DATA) {
        if (p->replica != 0) return 0;
        return model_save(m, path);
    }
    if (p->replica != 0) return 0; /* replica 0's pipeline holds the same parameters as the rest */
    const int K = p->stages;
    float *mine = xmalloc((m->nparams + 1) * sizeof(float));
    m->be->download(m->ctx, mine, m->params, m->nparams * sizeof(float));
    int *counts = NULL, *displs = NULL;
    float *all = NULL;
    if (p->stage == 0) {
        counts = xcalloc((size_t)K, sizeof(int)), displs = xcalloc((size_t)K, sizeof(int));
        for (int s = 0; s < K; s++) {
            size_t a = m->layers[p->first[s]].w_off;
            size_t b =
                p->first[s + 1] < m->nlayers ? m->layers[p->first[s + 1]].w_off : m->total_params;
            counts[s] = (int)(b - a), displs[s] = (int)a;
        }
        all = xmalloc((m->total_params + 1) * sizeof(float));
    }
    MPI_CHECK(MPI_Gatherv(mine, (int)m->nparams, MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0,
                          p->pipe_comm));
    int rc = 0;
    if (p->stage == 0) rc = model_save_params(m, all, path);
    free(mine), free(counts), free(displs), free(all);
    return rc;
}
