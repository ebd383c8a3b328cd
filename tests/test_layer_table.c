/* test_layer_table.c - the table of layer kinds (src/model/layers.h) is complete and
 * model_missing_op reads it: every LayerKind has a row that can plan and run; on the CPU backend,
 * which has every kernel, no model of the zoo misses an operation; with one optional operation
 * removed, a model whose layers call it is refused naming that operation and the layer, and a model
 * that does not call it is not. */
#include "harness.h"
#include "layers.h"

#include <stdio.h>
#include <string.h>

extern const ModelDesc model_lenet, model_fcn5, model_alexnet, model_vgg16, model_googlenet,
    model_resnet50, model_lstm32; /* src/model/models.c */

/* model_missing_op of d on [c,h,w] for the backend `be`; *layer receives the layer. */
static const char *missing(const ModelDesc *d, int c, int h, int w, const BackendOps *be,
                           int microbatches, const char **layer) {
    Model m;
    d = model_for_input(d, c, h, w);
    model_plan(&m, d, c, h, w, 10, 4);
    *layer = NULL;
    const char *op =
        m.problem[0] ? "(does not fit)" : model_missing_op(&m, be, microbatches, layer);
    static char where[64];
    snprintf(where, sizeof where, "%s", *layer ? *layer : "");
    *layer = where;
    model_free(&m);
    return op;
}

/* A copy of the CPU backend without the operation at `offset`. */
static BackendOps without(size_t offset) {
    BackendOps be = cpu_backend;
    memset((char *)&be + offset, 0, sizeof(void (*)(void)));
    return be;
}

int main(void) {
    for (int k = 0; k < LAYER_KINDS; k++) {
        const LayerKindOps *K = layer_kind((LayerKind)k);
        EXPECT(K && K->name && K->plan && K->forward && K->backward && K->needs,
               "kind %d has a named row with plan, forward and backward", k);
    }

    const struct {
        const ModelDesc *d;
        int c, h, w;
    } zoo[] = {{&model_lenet, 1, 28, 28},     {&model_fcn5, 26752, 1, 1},
               {&model_alexnet, 3, 32, 32},   {&model_vgg16, 3, 32, 32},
               {&model_googlenet, 3, 32, 32}, {&model_resnet50, 3, 32, 32},
               {&model_lstm32, 1, 1, 32}};
    const char *layer;
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        const char *op = missing(zoo[i].d, zoo[i].c, zoo[i].h, zoo[i].w, &cpu_backend, 2, &layer);
        EXPECT(op == NULL, "%s on the CPU backend, 2 micro-batches: nothing missing (%s)",
               zoo[i].d->name, op ? op : "none");
    }

    /* Each case: a model, an operation taken away, and what must be reported. */
    const struct {
        const ModelDesc *d;
        int c, h, w;
        LayerOp op;
        int microbatches;
        const char *expect_op; /* NULL: nothing missing */
    } cases[] = {
        {&model_alexnet, 3, 32, 32, LAYER_OP(lrn_backward), 1, "lrn_backward"},
        {&model_googlenet, 3, 32, 32, LAYER_OP(concat_forward), 1, "concat_forward"},
        {&model_resnet50, 3, 32, 32, LAYER_OP(batchnorm_forward_infer), 1,
         "batchnorm_forward_infer"},
        {&model_resnet50, 3, 32, 32, LAYER_OP(add_backward), 1, "add_backward"},
        {&model_resnet50, 3, 32, 32, LAYER_OP(axpy), 1, "axpy"}, /* residual: two readers */
        {&model_lstm32, 1, 1, 32, LAYER_OP(lstm_workspace_bytes), 1, "lstm_workspace_bytes"},
        {&model_lstm32, 1, 1, 32, LAYER_OP(embedding_forward), 1, "embedding_forward"},
        {&model_vgg16, 3, 32, 32, LAYER_OP(dropout_backward), 1, "dropout_backward"},
        {&model_lenet, 1, 28, 28, LAYER_OP(scale), 2, "scale"},    /* micro-batches scale */
        {&model_lenet, 1, 28, 28, LAYER_OP(axpy), 2, "axpy"},      /* and accumulate */
        {&model_lenet, 1, 28, 28, LAYER_OP(axpy), 1, NULL},        /* one reader each, no M */
        {&model_lenet, 1, 28, 28, LAYER_OP(lrn_forward), 1, NULL}, /* not called by LeNet */
        {&model_alexnet, 3, 32, 32, LAYER_OP(lstm_forward), 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        BackendOps be = without(cases[i].op.offset);
        const char *op = missing(cases[i].d, cases[i].c, cases[i].h, cases[i].w, &be,
                                 cases[i].microbatches, &layer);
        EXPECT(cases[i].expect_op ? op && !strcmp(op, cases[i].expect_op) && layer[0] : !op,
               "%s without %s, %d micro-batch(es): missing %s%s%s", cases[i].d->name,
               cases[i].op.name, cases[i].microbatches, op ? op : "nothing", op ? " at " : "",
               op ? layer : "");
    }
    return check_summary();
}
