/* test_pool_ties.c - max pooling compared by tie groups (tests/pool_ties.c, used by
 * tests/layer_compare.c), and why a comparison position by position cannot hold for 16-bit
 * storage, on the CPU backend's max pooling (whose first-maximum rule the GPU kernels share,
 * tests/test_cuda_nhwc.c):
 *   1. hand-made windows: two right routings of a tie (first and last maximum) have the same
 *      group sums and both pass the routing check; a gradient sent to a position holding no
 *      maximum, or half a window's gradient lost, fails it; overlapping windows that share a
 *      tied position form one group;
 *   2. AlexNet's pool2 (k3 s2 p1) on random inputs: "A" pools the fp32 values, "B" their bf16
 *      rounding (as the GPU's NHWC bf16 activations, their gradients rounded likewise). Windows
 *      whose first maximum moved are all ties made by rounding; compared position by position
 *      the input gradients differ by over 0.05 of their norm (the GPU run's failure: 0.064 and
 *      0.088 on AlexNet's pool1 and pool2), per tie group by bf16's rounding only; B's outputs
 *      are its windows' maxima and its routing passes, and a wrong routing does not. */
#include "half_bits.h" /* defines: gc_bf16_* */
#include "kernel_test.h"
#include "pool_ties.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float bf16(float v) {
    return gc_bf16_to_float(gc_bf16_from_float(v));
}

/* ||a - b|| / ||a|| */
static double norm_rel(const float *a, const float *b, size_t n) {
    double dd = 0, aa = 0;
    for (size_t i = 0; i < n; i++)
        dd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), aa += (double)a[i] * a[i];
    return aa > 0 ? sqrt(dd / aa) : INFINITY;
}

/* one 1x1x2x4 image, k2 s2: window 0 holds 3 at two places, window 1 a unique 5 */
static void hand_made(void) {
    const PoolShape s = {1, 1, 2, 4, 2, 2, 0, 1, 2};
    const float x[8] = {3, 1, 2, 5, 0, 3, 4, 4}, dy[2] = {0.5f, -2};
    const float first[8] = {0.5f, 0, 0, -2, 0, 0, 0, 0}, last[8] = {0, 0, 0, -2, 0, 0.5f, 0, 0};
    const float wrong[8] = {0, 0.5f, 0, -2, 0, 0, 0, 0}, lost[8] = {0.25f, 0, 0, -2, 0, 0, 0, 0};
    long *g = pool_tie_groups(&s, x);
    EXPECT(g[0] == 0 && g[5] == 0 && g[3] == 3 && g[1] < 0 && g[2] < 0 && g[4] < 0 && g[6] < 0 &&
               g[7] < 0,
           "tie groups: {0, 5} and {3}; 1, 2, 4, 6, 7 hold no maximum");
    float a[8], b[8];
    pool_group_sums(8, g, first, a), pool_group_sums(8, g, last, b);
    check_same_bits("the two routings of a tie, summed per group", b, a, 8);
    double worst;
    EXPECT(pool_check_routing(&s, x, g, dy, first, 0x1p-24, &worst) == 0 &&
               pool_check_routing(&s, x, g, dy, last, 0x1p-24, &worst) == 0,
           "routing check: the first and the last tied maximum both pass");
    EXPECT(pool_check_routing(&s, x, g, dy, wrong, 0x1p-24, &worst) == 2,
           "routing check: a gradient on a position holding no maximum fails (and its group lacks "
           "it)");
    EXPECT(pool_check_routing(&s, x, g, dy, lost, 0x1p-24, &worst) == 1 && worst > 1e6,
           "routing check: half a window's gradient lost fails (%.3g of the bound)", worst);
    free(g);
    /* k3 s2 p1 on one row of 5: windows {0,1}, {1,2,3}, {3,4}; window 0 ties at 0 and 1, window
     * 1's maximum is 1 alone, window 2 ties at 3 and 4: groups {0,1} (windows 0 and 1) and {3,4} */
    const PoolShape o = {1, 1, 1, 5, 3, 2, 1, 1, 3};
    const float xo[5] = {7, 7, 1, 2, 2};
    g = pool_tie_groups(&o, xo);
    EXPECT(g[0] == 0 && g[1] == 0 && g[2] < 0 && g[3] == 3 && g[4] == 3,
           "overlapping windows: {0, 1} (windows 0 and 1 share the tie), {3, 4} (window 2)");
    const float dyo[3] = {1, 2, 4}, dxo[5] = {0, 3, 0, 0, 4};
    EXPECT(
        pool_check_routing(&o, xo, g, dyo, dxo, 0x1p-24, &worst) == 0,
        "overlapping windows: both windows' gradient on the shared maximum, the other on its tie");
    free(g);
}

/* AlexNet's pool2 input [2,32,16,16], k3 s2 p1: A on fp32 values, B on their bf16 rounding */
static void rounded(void) {
    const PoolShape s = {2, 32, 16, 16, 3, 2, 1, 8, 8};
    const size_t nx = 2 * 32 * 16 * 16, ny = 2 * 32 * 8 * 8;
    float *x = rand_floats(nx, -1, 1), *dy = rand_floats(ny, -1, 1);
    float *xr = halloc(nx), *dyr = halloc(ny);
    for (size_t i = 0; i < nx; i++)
        xr[i] = bf16(x[i]);
    for (size_t i = 0; i < ny; i++)
        dyr[i] = bf16(dy[i]);
    float *ya = falloc(ny), *yb = falloc(ny), *dxa = falloc(nx), *dxb = falloc(nx);
    int32_t *ama = malloc(ny * sizeof *ama), *amb = malloc(ny * sizeof *amb);
    B->maxpool_forward(ctx, &s, x, ya, ama), B->maxpool_backward(ctx, &s, ama, dy, dxa);
    B->maxpool_forward(ctx, &s, xr, yb, amb), B->maxpool_backward(ctx, &s, amb, dyr, dxb);
    for (size_t i = 0; i < nx; i++)
        dxb[i] = bf16(dxb[i]);
    size_t tied = 0;
    const size_t moved = pool_moved_maxima(&s, x, xr, &tied);
    EXPECT(moved > 0 && tied == moved,
           "rounding to bf16 moved the first maximum of %zu of %zu windows, %zu of them ties",
           moved, ny, tied);
    const double raw = norm_rel(dxa, dxb, nx);
    EXPECT(raw > 0.05, "position by position the input gradients differ by %.3g of their norm",
           raw);
    long *g = pool_tie_groups(&s, xr);
    float *ga = halloc(nx), *gb = halloc(nx);
    pool_group_sums(nx, g, dxa, ga), pool_group_sums(nx, g, dxb, gb);
    const double grouped = norm_rel(ga, gb, nx);
    EXPECT(grouped < 2 * 0x1p-8, "per tie group they differ by %.3g: bf16's rounding (2^-8 = %.3g)",
           grouped, 0x1p-8);
    EXPECT(pool_not_window_max(&s, xr, yb) == 0 && pool_not_window_max(&s, x, ya) == 0,
           "every output is its window's maximum, in A's values and in B's");
    double worst;
    size_t bad = pool_check_routing(&s, xr, g, dyr, dxb, 0x1p-8, &worst);
    EXPECT(bad == 0,
           "B's routing: every group = its windows' gradient within its rounding (%.3g "
           "of the bound)",
           worst);
    long *ga_groups = pool_tie_groups(&s, x);
    bad = pool_check_routing(&s, x, ga_groups, dy, dxa, 0x1p-24, &worst);
    EXPECT(bad == 0, "A's routing on its own values (%.3g of the bound)", worst);
    /* a wrong B: window 0's gradient moved onto position 16 + 1 of its window, or 1, or 0
     * (the first that holds no window's maximum) */
    const long a0 = pool_first_max(&s, xr, 0), cand[4] = {17, 16, 1, 0};
    long other = -1;
    for (int i = 0; i < 4 && other < 0; i++)
        if (g[cand[i]] < 0) other = cand[i];
    EXPECT(other >= 0, "window 0 has a position holding no maximum (%ld)", other);
    if (other >= 0) {
        dxb[other] += dyr[0], dxb[a0] -= dyr[0];
        bad = pool_check_routing(&s, xr, g, dyr, dxb, 0x1p-8, &worst);
        EXPECT(bad >= 1, "a window's gradient routed to a non-maximum is found (%zu)", bad);
    }
    free(x), free(dy), free(xr), free(dyr), free(ga), free(gb), free(g), free(ga_groups);
    free(ama), free(amb);
    B->free(ctx, ya), B->free(ctx, yb), B->free(ctx, dxa), B->free(ctx, dxb);
}

int main(void) {
    kernel_test_init(17);
    hand_made();
    rounded();
    return kernel_test_finish();
}
