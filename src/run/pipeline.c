/* pipeline.c - the layout of model and hybrid parallelism (see pipeline.h): checking the stages
 * and micro-batches against the model and the ranks, choosing the stages, the communicators, and
 * gathering the stages' parameters into one file. The timed loop is the driver's (driver.c). */
#include "pipeline.h"
#include "mpi_check.h"
#include "model_sync.h"
#include "partition.h"
#include "pipeline_p2p.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration -------------------------------------------------------------------------- */

void pipeline_setup(Pipeline *p, const Options *opt, ParallelMode mode, const Model *plan,
                    const Topology *topo, int dry_run) {
    memset(p, 0, sizeof *p);
    p->pipe_comm = p->stage_comm = MPI_COMM_NULL;
    const int nranks = topo->nranks, n = plan->nlayers;
    p->mode = mode;
    p->microbatches = opt->microbatches;

    if (p->mode == PARALLEL_DATA) {
        usage_check_all(opt->stages <= 1,
                        "--stages: %d is not accepted with --parallel data (pipeline stages need "
                        "--parallel model or hybrid)",
                        opt->stages);
        usage_check_all(!opt->split[0],
                        "--split: '%s' is not accepted with --parallel data (it places pipeline "
                        "stages: --parallel model or hybrid)",
                        opt->split);
        usage_check_all(opt->microbatches == 1,
                        "--microbatches: %d is not accepted with --parallel data (micro-batches "
                        "are pipelined: --parallel model or hybrid)",
                        opt->microbatches);
        p->stages = 1;
        p->replicas = nranks, p->replica = topo->rank;
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
        p->replicas = dry_run == 1 ? (nranks % K == 0 ? nranks / K : 1) : nranks / K;
        p->stage = topo->rank % K, p->replica = topo->rank / K;
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
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->replica, p->stage, &p->pipe_comm));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->stage, p->replica, &p->stage_comm));
    MPI_CHECK(MPI_Comm_set_errhandler(p->pipe_comm, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_set_errhandler(p->stage_comm, MPI_ERRORS_RETURN));
}

void pipeline_free(Pipeline *p) {
    if (p->pipe_comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&p->pipe_comm));
    if (p->stage_comm != MPI_COMM_NULL && p->stage_comm != MPI_COMM_WORLD)
        MPI_CHECK(MPI_Comm_free(&p->stage_comm));
    free(p->first);
    memset(p, 0, sizeof *p);
}

void pipeline_print(const Pipeline *p, const Model *plan, FILE *out) {
    double total = model_flops_per_sample(plan);
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

int pipeline_save_model(const Pipeline *p, const Model *m, const char *path) {
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
