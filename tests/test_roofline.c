/* test_roofline.c - the roofline of --profile-layers where a GPU would run it, on the CPU
 * (tests/test_profile_layers.sh checks the CPU's own runs):
 *   - the least bytes with activations stored in bf16 (NHWC, through the fake backend of
 *     tests/act_fake.c): LeNet's rows from their shapes with 2 bytes a value (the data as
 *     converted, x_act), 4 for the logits and their gradient, parameters and gradients;
 *   - fused rows in bf16 (the fake's fused operations, as on a GPU): a batch norm run with its
 *     ReLU, and with its residual add and ReLU, holds the group's FLOPs and its bytes without the
 *     tensors handed inside it; a convolution run with its ReLU forward holds both rows' forward
 *     FLOPs and the convolution's own bytes, the ReLU its own backward; rows fused into another
 *     hold 0 where the profile times 0;
 *   - the peaks: the table's figures for GPUs it knows, in each precision (MIG slices and other
 *     names unknown); a device it does not know (the CPU backend dressed as a device) measured
 *     by a copy and a product, its 16-bit product left unknown with the reason; the CPU's triad
 *     and product. */
#include "act_fake.h"
#include "harness.h"
#include "layers.h"
#include "roofline.h"
#include "clock.h" /* defines: dt_now */
#include "fail.h"  /* defines: check_fail */

#include <math.h>
#include <stdio.h>
#include <string.h>

extern const ModelDesc model_lenet;
extern const BackendOps cpu_backend;

enum { BATCH = 4 };

typedef struct {
    double fwd_flop, bwd_flop, fwd_bytes, bwd_bytes;
} Amounts;

/* Bytes a value of row j's output takes in NHWC bf16: 2, the logits 4 (fp32 in every format);
 * the data (j < 0) is read converted, 2. */
static double value_bytes(const Model *m, int j) {
    return j == m->nlayers - 1 ? 4.0 : 2.0;
}

/* Row j alone on n samples, from its shapes and kind (docs/hdf5-layout.md's counts). */
static Amounts alone(const Model *m, int j, int n) {
    const Layer *L = &m->layers[j];
    double in = 0.0, dx = 0.0, vals = (double)L->out_size;
    for (int k = 0; k < L->ninputs; k++) {
        const int p = L->inputs[k];
        const double bytes =
            (double)(p < 0 ? m->x_size : m->layers[p].out_size) * value_bytes(m, p);
        in += bytes, dx += p >= 0 ? bytes : 0.0;
    }
    const double out = vals * value_bytes(m, j), params = 4.0 * (double)(L->nw + L->nb);
    const double weights = dx > 0 ? 4.0 * (double)L->nw : 0.0, F = L->flops;
    switch (L->d.kind) {
    case LAYER_CONV:
    case LAYER_FC:
        return (Amounts){n * F, n * F * (dx > 0 ? 2 : 1), n * (in + out) + params,
                         n * (out + in + dx) + params + weights};
    case LAYER_BATCHNORM: /* forward: x read for the statistics, then to normalise */
        return (Amounts){n * 5 * vals, n * 8 * vals, n * (2 * in + out) + params,
                         n * (out + in + dx) + params + weights};
    case LAYER_RELU:
        return (Amounts){n * vals, n * vals, n * (in + out), n * 3 * out};
    case LAYER_MAXPOOL:
        return (Amounts){n * F, n * vals, n * (in + out), n * (out + in)};
    case LAYER_ADD:
        return (Amounts){n * vals, 0.0, n * (in + out), n * (out + dx)};
    case LAYER_CONCAT:
        return (Amounts){0.0, 0.0, n * (in + out), n * (out + dx)};
    case LAYER_DROPOUT:
        return (Amounts){n * vals, n * vals, n * (in + out), n * (out + dx)};
    case LAYER_LRN: /* dy, x and y read */
        return (Amounts){n * F, n * F, n * (in + out), n * (out + in + out + dx)};
    default:
        check_fail(__FILE__, __LINE__, "alone", "a kind this test does not count");
    }
    return (Amounts){0, 0, 0, 0};
}

static int same(const LayerCost *c, const Amounts *a) {
    const double got[4] = {c->forward_flop, c->backward_flop, c->forward_bytes, c->backward_bytes};
    const double want[4] = {a->fwd_flop, a->bwd_flop, a->fwd_bytes, a->bwd_bytes};
    for (int i = 0; i < 4; i++)
        if (fabs(got[i] - want[i]) > 1e-9 * fabs(want[i])) return 0;
    return 1;
}

static void build(Model *m, BackendCtx **ctx, const ModelDesc *d, const BackendOps *be) {
    BackendConfig cfg = {.threads = 1};
    be->init(&cfg, ctx);
    model_build(m, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH, be, *ctx, 5);
}

/* ---- LeNet, NHWC bf16, unfused ----------------------------------------------------------------
 */

static void test_bf16_bytes(void) {
    Model m;
    BackendCtx *ctx;
    act_fake_format = (ActFormat){ACT_NHWC, ACT_BF16};
    build(&m, &ctx, &model_lenet, act_fake_backend(0));
    int bad = m.act_bytes != 2;
    for (int j = 0; j < m.nlayers; j++) {
        LayerCost c;
        model_layer_cost(&m, j, BATCH, &c);
        const Amounts a = alone(&m, j, BATCH);
        if (!same(&c, &a)) {
            bad++;
            printf("  %s: got %g %g %g %g, want %g %g %g %g\n", m.layers[j].d.name, c.forward_flop,
                   c.backward_flop, c.forward_bytes, c.backward_bytes, a.fwd_flop, a.bwd_flop,
                   a.fwd_bytes, a.bwd_bytes);
        }
    }
    const Layer *ip2 = &m.layers[m.nlayers - 1];
    LayerCost c;
    model_layer_cost(&m, m.nlayers - 1, BATCH, &c);
    EXPECT(bad == 0,
           "LeNet on NHWC bf16: every row's FLOPs and least bytes from its shapes, 2 "
           "bytes a value; %s's logits %zu x 4 bytes: %g B forward (%d wrong)",
           ip2->d.name, ip2->out_size, c.forward_bytes, bad);
    model_free(&m);
    act_fake_backend(0)->finalize(ctx);
}

/* ---- fused rows, NHWC bf16 ---------------------------------------------------------------------
 */

static void test_fused(void) {
    Model m;
    BackendCtx *ctx;
    act_fake_format = (ActFormat){ACT_NHWC, ACT_BF16};
    build(&m, &ctx, &act_fake_joins, act_fake_backend(1));
    int groups = 0, convs = 0, zeros = 0, bad = 0;
    for (int j = 0; j < m.nlayers; j++) {
        const Layer *L = &m.layers[j];
        LayerCost c;
        model_layer_cost(&m, j, BATCH, &c);
        Amounts want = alone(&m, j, BATCH);
        if (L->d.kind == LAYER_BATCHNORM && L->fuse_relu >= 0) {
            /* x read twice (the statistics, then the normalisation), z read (with the add), y
             * written; dy and y read, dx (and dz) written; the group's FLOPs */
            const double o = BATCH * (double)L->out_size * 2.0, P = 4.0 * (double)(L->nw + L->nb);
            const int add = L->fuse_add >= 0;
            const Amounts relu = alone(&m, L->fuse_relu, BATCH);
            want.fwd_flop += relu.fwd_flop, want.bwd_flop += relu.bwd_flop;
            if (add) {
                const Amounts a = alone(&m, L->fuse_add, BATCH);
                want.fwd_flop += a.fwd_flop, want.bwd_flop += a.bwd_flop;
            }
            want.fwd_bytes = (add ? 4 : 3) * o + P;
            want.bwd_bytes = (add ? 5 : 4) * o + P + 4.0 * (double)L->nw;
            groups++;
        } else if (L->d.kind == LAYER_CONV && L->fuse_relu >= 0) {
            const Amounts relu = alone(&m, L->fuse_relu, BATCH);
            want.fwd_flop += relu.fwd_flop; /* its bytes: the convolution's alone */
            convs++;
        } else if (L->exec_as < 0 || (L->d.kind == LAYER_ADD && L->exec_as != j)) {
            want = (Amounts){0, 0, 0, 0}; /* run by its batch norm */
            zeros++;
        } else if (L->fwd_fused) {
            want.fwd_flop = want.fwd_bytes = 0.0; /* its convolution ran its forward */
            zeros++;
        }
        if (!same(&c, &want)) {
            bad++;
            printf("  %s: got %g %g %g %g, want %g %g %g %g\n", L->d.name, c.forward_flop,
                   c.backward_flop, c.forward_bytes, c.backward_bytes, want.fwd_flop, want.bwd_flop,
                   want.fwd_bytes, want.bwd_bytes);
        }
    }
    EXPECT(bad == 0 && groups == 2 && convs >= 1 && zeros >= 4,
           "fused rows on NHWC bf16: %d batch norms with their ReLU (one with its add) and %d "
           "convolution with its ReLU hold their groups' amounts, %d rows fused into another 0 "
           "(%d wrong)",
           groups, convs, zeros, bad);
    model_free(&m);
    act_fake_backend(1)->finalize(ctx);
}

/* ---- the peaks ---------------------------------------------------------------------------------
 */

static void test_table(void) {
    static const struct {
        const char *name;
        Precision p;
        int known;
        double bandwidth, flops;
    } cases[] = {
        {"NVIDIA H200", PRECISION_BF16, 1, 4.8e12, 989.5e12},
        {"NVIDIA H200", PRECISION_FP16, 1, 4.8e12, 989.5e12},
        {"NVIDIA H200", PRECISION_TF32, 1, 4.8e12, 494.5e12},
        {"NVIDIA H200", PRECISION_FP32, 1, 4.8e12, 67e12},
        {"NVIDIA H100 80GB HBM3", PRECISION_BF16, 1, 3.35e12, 989.5e12},
        {"NVIDIA A100-SXM4-80GB", PRECISION_TF32, 1, 2.039e12, 156e12},
        {"NVIDIA A100-SXM4-40GB", PRECISION_FP32, 1, 1.555e12, 19.5e12},
        {"NVIDIA H100 80GB HBM3 MIG 1g.10gb", PRECISION_BF16, 0, 0, 0},
        {"NVIDIA H20", PRECISION_BF16, 0, 0, 0},
        {"AMD EPYC", PRECISION_FP32, 0, 0, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        RooflinePeak pk = {NAN, NAN, "", ""};
        const int known = roofline_known_gpu(cases[i].name, cases[i].p, &pk);
        int ok = known == cases[i].known;
        if (ok && known)
            ok = fabs(pk.bandwidth / cases[i].bandwidth - 1) < 1e-12 &&
                 fabs(pk.flops / cases[i].flops - 1) < 1e-12 &&
                 strstr(pk.bandwidth_how, cases[i].name) && strstr(pk.flops_how, "datasheet");
        if (!ok)
            printf("  %s %s: known %d, %g B/s, %g FLOP/s (%s; %s)\n", cases[i].name,
                   PRECISION_NAME(cases[i].p), known, pk.bandwidth, pk.flops, pk.bandwidth_how,
                   pk.flops_how);
        bad += !ok;
    }
    EXPECT(bad == 0,
           "the table: datasheet peaks of known GPUs by precision (dense), other names "
           "and MIG slices unknown (%d wrong)",
           bad);
}

static void test_measured(void) {
    BackendOps gpu = cpu_backend; /* a device the table does not know */
    gpu.name = "fake-gpu", gpu.device_memory = 1;
    BackendCtx *ctx;
    BackendConfig cfg = {.threads = 1};
    cpu_backend.init(&cfg, &ctx);
    RooflinePeak known, fp32, bf16, cpu;
    roofline_peak(&gpu, ctx, "NVIDIA H200", PRECISION_BF16, (ActFormat){ACT_NHWC, ACT_BF16},
                  &known);
    EXPECT(known.bandwidth == 4.8e12 && !strncmp(known.flops_how, "NVIDIA H200: ", 13),
           "a GPU the table knows: looked up (%s)", known.flops_how);
    roofline_peak(&gpu, ctx, "fake GPU", PRECISION_FP32, (ActFormat){ACT_NCHW, ACT_FP32}, &fp32);
    EXPECT(fp32.bandwidth > 1e8 && fp32.flops > 1e8 && strstr(fp32.bandwidth_how, "copy") &&
               strstr(fp32.flops_how, "product"),
           "an unknown GPU: %.3g GB/s (%s), %.4g GFLOP/s (%s)", fp32.bandwidth / 1e9,
           fp32.bandwidth_how, fp32.flops / 1e9, fp32.flops_how);
    roofline_peak(&gpu, ctx, "fake GPU", PRECISION_BF16, (ActFormat){ACT_NHWC, ACT_BF16}, &bf16);
    EXPECT(bf16.bandwidth > 1e8 && isnan(bf16.flops) && !strncmp(bf16.flops_how, "unknown: ", 9),
           "an unknown GPU in bf16: its product not measured (%s)", bf16.flops_how);
    roofline_peak(&cpu_backend, ctx, cpu_backend.name, PRECISION_FP32,
                  (ActFormat){ACT_NCHW, ACT_FP32}, &cpu);
    EXPECT(cpu.bandwidth > 1e8 && cpu.flops > 1e8 && strstr(cpu.bandwidth_how, "axpy"),
           "the CPU: %.3g GB/s (%s), %.4g GFLOP/s (%s)", cpu.bandwidth / 1e9, cpu.bandwidth_how,
           cpu.flops / 1e9, cpu.flops_how);
    cpu_backend.finalize(ctx);
}

/* The compute peak alone (the root attribute peak_flops): the table's for a GPU it knows, else
 * the product measured as roofline_peak measures it; the bandwidth is not measured. */
static void test_peak_flops(void) {
    BackendOps gpu = cpu_backend;
    gpu.name = "fake-gpu", gpu.device_memory = 1;
    BackendCtx *ctx;
    BackendConfig cfg = {.threads = 1};
    cpu_backend.init(&cfg, &ctx);
    RooflinePeak known, cpu;
    roofline_peak_flops(&gpu, ctx, "NVIDIA H200", PRECISION_FP32, (ActFormat){ACT_NCHW, ACT_FP32},
                        &known);
    EXPECT(known.flops == 67e12 && !strncmp(known.flops_how, "NVIDIA H200: ", 13),
           "peak_flops of a GPU the table knows: %.4g (%s)", known.flops, known.flops_how);
    const double t0 = dt_now();
    roofline_peak_flops(&cpu_backend, ctx, cpu_backend.name, PRECISION_FP32,
                        (ActFormat){ACT_NCHW, ACT_FP32}, &cpu);
    const double took = dt_now() - t0;
    EXPECT(cpu.flops > 1e8 && isnan(cpu.bandwidth) &&
               !strncmp(cpu.flops_how, "measured at start", 17),
           "peak_flops of the CPU: %.4g GFLOP/s (%s), bandwidth %g", cpu.flops / 1e9, cpu.flops_how,
           cpu.bandwidth);
    printf("peak_flops measured in %.3f s\n", took);
    cpu_backend.finalize(ctx);
}

int main(void) {
    test_bf16_bytes();
    test_fused();
    test_table();
    test_measured();
    test_peak_flops();
    return check_summary();
}
