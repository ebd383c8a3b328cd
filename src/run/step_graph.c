/* step_graph.c - forward and backward passes replayed from captured graphs (see step_graph.h). */
#include "step_graph.h"
#include "alloc.h" /* defines: xcalloc */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int step_graphs_parts(Toggle mode, const BackendOps *be, const Model *plan, int stages,
                      int microbatches, int overlap, int profile, char *why, size_t len) {
    const char *layer = NULL;
    why[0] = '\0';
    if (mode == TOGGLE_OFF)
        snprintf(why, len, "--graphs off");
    else if (!be->graph_capture || !be->graph_launch || !be->graph_free)
        snprintf(why, len, "the %s backend cannot capture graphs", be->name);
    else if (stages > 1)
        snprintf(why, len, "pipeline stages synchronise and exchange messages inside the step");
    else if (microbatches > 1)
        snprintf(why, len, "micro-batches read their losses inside the step");
    else if (profile)
        snprintf(why, len, "--profile-layers times each layer between eager launches");
    else if ((layer = model_step_argument_layer(plan)))
        snprintf(why, len, "layer %s passes per-step values to its kernels", layer);
    if (why[0]) return 0;
    if (overlap) {
        snprintf(why, len, "backward: --overlap starts the exchange between its layers");
        return STEP_GRAPH_FORWARD;
    }
    return STEP_GRAPH_FORWARD | STEP_GRAPH_BACKWARD;
}

/* One cached graph and the arguments it was captured with. */
typedef struct {
    void *graph; /* NULL: free entry */
    int part, n;
    const float *x;
    const int32_t *labels;
    float loss_scale;
} GraphEntry;

/* What the captured work reads (it outlives the capture: a backend may run it again). */
typedef struct {
    Model *m;
    int n;
} StepCall;

struct StepGraphs {
    Model *m;
    int parts;
    int seen[3]; /* eager first passes done, per part */
    StepCall call;
    GraphEntry cache[STEP_GRAPH_CACHE];
    int next_victim;
    long captures;
};

StepGraphs *step_graphs_create(Model *m, int parts) {
    if (!parts) return NULL;
    StepGraphs *g = xcalloc(1, sizeof *g);
    g->m = m, g->parts = parts;
    return g;
}

static void forward_work(void *arg) {
    const StepCall *c = arg;
    model_forward_part(c->m, 0, c->n, 0, 1);
    model_loss_queue(c->m, 0, c->n, 1, 1.0f);
}

static void backward_work(void *arg) {
    const StepCall *c = arg;
    model_backward_part(c->m, 0, c->n, 0, 0);
}

/* The graph of `part` for the model's current arguments, captured when first met. */
static void *graph_for(StepGraphs *g, int part, int n) {
    const Model *m = g->m;
    const int fwd = part == STEP_GRAPH_FORWARD;
    /* the loss scale is part of the key only where the kernel gets it as a value */
    const float scale = fwd && !m->loss_scale_dev ? m->loss_scale : 0.0f;
    GraphEntry key = {NULL, part, n, m->x, fwd ? m->labels : NULL, scale};
    for (int i = 0; i < STEP_GRAPH_CACHE; i++) {
        const GraphEntry *c = &g->cache[i];
        if (c->graph && c->part == key.part && c->n == key.n && c->x == key.x &&
            c->labels == key.labels && c->loss_scale == key.loss_scale)
            return c->graph;
    }
    GraphEntry *e = NULL;
    for (int i = 0; i < STEP_GRAPH_CACHE && !e; i++)
        if (!g->cache[i].graph) e = &g->cache[i];
    if (!e) { /* full (a loss scale that keeps changing): replace in turn */
        e = &g->cache[g->next_victim];
        g->next_victim = (g->next_victim + 1) % STEP_GRAPH_CACHE;
        m->be->graph_free(m->ctx, e->graph);
    }
    g->call = (StepCall){g->m, n};
    key.graph = m->be->graph_capture(m->ctx, fwd ? forward_work : backward_work, &g->call);
    *e = key;
    g->captures++;
    return e->graph;
}

static int run_part(StepGraphs *g, int part, int n) {
    if (!g || !(g->parts & part)) return 0;
    if (!g->seen[part]) { /* the first step runs eagerly: lazy set-up happens there */
        g->seen[part] = 1;
        return 0;
    }
    void *graph = graph_for(g, part, n);
    g->call = (StepCall){g->m, n};
    g->m->be->graph_launch(g->m->ctx, graph);
    return 1;
}

int step_graphs_forward(StepGraphs *g, int n) {
    return run_part(g, STEP_GRAPH_FORWARD, n);
}

int step_graphs_backward(StepGraphs *g, int n) {
    return run_part(g, STEP_GRAPH_BACKWARD, n);
}

long step_graphs_captures(const StepGraphs *g) {
    return g ? g->captures : 0;
}

void step_graphs_free(StepGraphs *g) {
    if (!g) return;
    for (int i = 0; i < STEP_GRAPH_CACHE; i++)
        if (g->cache[i].graph) g->m->be->graph_free(g->m->ctx, g->cache[i].graph);
    free(g);
}
