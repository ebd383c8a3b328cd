/* coll_nccl_plan.c - pure logic of the NCCL collective (see coll_nccl_plan.h). */
#include "coll_nccl_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

NcclRedChoice nccl_red_choice(float scale, int size) {
    if (scale == 1.0f) return NCCL_RED_SUM;
    if (size > 0 && scale == 1.0f / (float)size) return NCCL_RED_AVG;
    return NCCL_RED_PREMUL;
}

static int by_start(const void *a, const void *b) {
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

double hidden_union(const double *start, const double *end, int n, double bwd_end) {
    if (n <= 0) return 0.0;
    double *iv = malloc(2 * (size_t)n * sizeof *iv);
    if (!iv) return 0.0;
    for (int i = 0; i < n; i++)
        iv[2 * i] = start[i], iv[2 * i + 1] = end[i];
    qsort(iv, (size_t)n, 2 * sizeof *iv, by_start);
    double sum = 0.0, covered = -1e300;
    for (int i = 0; i < n; i++) {
        double s = iv[2 * i], e = iv[2 * i + 1];
        if (s < covered) s = covered;
        if (e > bwd_end) e = bwd_end;
        if (e > s) sum += e - s;
        if (e > covered) covered = e;
    }
    free(iv);
    return sum;
}

int duplicate_gpu(const unsigned char *uuids, int n, int *first) {
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++)
            if (!memcmp(uuids + (size_t)i * GPU_UUID_BYTES, uuids + (size_t)j * GPU_UUID_BYTES,
                        GPU_UUID_BYTES)) {
                *first = i;
                return j;
            }
    return -1;
}

void gpu_uuid_text(const unsigned char *u, char *buf, unsigned long len) {
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}
