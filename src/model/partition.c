/* partition.c - pipeline stage boundaries (see partition.h): the possible cuts of a model's
 * layer graph, a FLOPs-balanced choice of K-1 of them (dynamic programme minimising the largest
 * stage), and the parser of --split. */
#include "partition.h"
#include "alloc.h" /* defines: xcalloc */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int partition_cuts(const Model *plan, int *cut_ok) {
    const int n = plan->nlayers;
    /* lowest[s]: the lowest row read by any row >= s (the model input counts as -1) */
    int lowest = n, count = 0;
    for (int s = n - 1; s >= 0; s--) {
        const Layer *L = &plan->layers[s];
        for (int k = 0; k < L->ninputs; k++)
            if (L->inputs[k] < lowest) lowest = L->inputs[k];
        cut_ok[s] = s > 0 && lowest >= s - 1;
        count += cut_ok[s];
    }
    return count;
}

double partition_flops(const Model *plan, int a, int b) {
    double f = 0.0;
    for (int i = a; i < b; i++)
        f += plan->layers[i].flops;
    return f;
}

int partition_balance(const Model *plan, int stages, int *first) {
    const int n = plan->nlayers;
    int *cut_ok = xcalloc((size_t)n, sizeof(int));
    int ncuts = partition_cuts(plan, cut_ok);
    if (stages < 1 || ncuts < stages - 1) {
        free(cut_ok);
        return -1;
    }
    /* Boundaries: row 0, every possible cut, row n. prefix[i]: FLOPs of rows before bound[i]. */
    int nb = 0, *bound = xcalloc((size_t)n + 1, sizeof(int));
    bound[nb++] = 0;
    for (int s = 1; s < n; s++)
        if (cut_ok[s]) bound[nb++] = s;
    bound[nb++] = n;
    double *prefix = xcalloc((size_t)nb, sizeof(double));
    for (int i = 1; i < nb; i++)
        prefix[i] = prefix[i - 1] + partition_flops(plan, bound[i - 1], bound[i]);

    /* best[k][i]: smallest largest-stage FLOPs of rows [0, bound[i]) in k+1 stages; from[k][i]
     * the boundary where its last stage starts. */
    double *best = xcalloc((size_t)stages * nb, sizeof(double));
    int *from = xcalloc((size_t)stages * nb, sizeof(int));
    for (int i = 0; i < nb; i++)
        best[i] = prefix[i], from[i] = 0;
    for (int k = 1; k < stages; k++)
        for (int i = 0; i < nb; i++) {
            double b = 1e300;
            int arg = -1;
            for (int j = k; j < i; j++) { /* j >= k: earlier stages hold at least one row each */
                double worst = best[(k - 1) * nb + j];
                double last = prefix[i] - prefix[j];
                if (last > worst) worst = last;
                if (worst < b) b = worst, arg = j;
            }
            best[k * nb + i] = b, from[k * nb + i] = arg;
        }
    int i = nb - 1;
    first[stages] = n;
    for (int k = stages - 1; k >= 0; k--) {
        int j = k > 0 ? from[k * nb + i] : 0;
        first[k] = bound[j];
        i = j;
    }
    free(cut_ok), free(bound), free(prefix), free(best), free(from);
    return 0;
}

void partition_cuts_text(const Model *plan, char *buf, size_t len) {
    const int n = plan->nlayers;
    int *cut_ok = xcalloc((size_t)n, sizeof(int));
    partition_cuts(plan, cut_ok);
    size_t used = 0;
    buf[0] = '\0';
    for (int s = 1; s < n && used + 24 < len; s++) {
        if (!cut_ok[s]) continue;
        int e = s;
        while (e + 1 < n && cut_ok[e + 1])
            e++;
        used += (size_t)snprintf(buf + used, len - used, used ? ",%d" : "%d", s);
        if (e > s)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", e > s + 1 ? "-" : ",", e);
        s = e;
    }
    if (!used) snprintf(buf, len, "none");
    free(cut_ok);
}

int partition_parse(const Model *plan, const char *text, int stages, int *first, char *err,
                    size_t errlen) {
    const int n = plan->nlayers;
    int *cut_ok = xcalloc((size_t)n, sizeof(int));
    partition_cuts(plan, cut_ok);
    char cuts[400];
    partition_cuts_text(plan, cuts, sizeof cuts);
    int count = 0, rc = 0;
    first[0] = 0;
    for (const char *p = text; *p && rc == 0;) {
        char *end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            snprintf(err, errlen,
                     "--split: '%s' is not accepted: expected %d comma-separated layer indices "
                     "(cuts of %s are possible before layers %s)",
                     text, stages - 1, plan->desc->name, cuts);
            rc = -1;
        } else if (count == stages - 1) {
            snprintf(err, errlen, "--split: '%s' is not accepted: %d stages take %d indices", text,
                     stages, stages - 1);
            rc = -1;
        } else if (v <= first[count] || v >= n) {
            snprintf(err, errlen,
                     "--split: %ld is not accepted: indices must increase, within 1..%d (%s has %d "
                     "layers)",
                     v, n - 1, plan->desc->name, n);
            rc = -1;
        } else if (!cut_ok[v]) {
            int reader = -1, reads = -1; /* a row from v on that reads a row before v-1 */
            for (int i = (int)v; i < n && reader < 0; i++)
                for (int k = 0; k < plan->layers[i].ninputs; k++)
                    if (plan->layers[i].inputs[k] < v - 1)
                        reader = i, reads = plan->layers[i].inputs[k];
            snprintf(err, errlen,
                     "--split: %ld is not accepted: %s cannot be cut before layer %ld (%s), where "
                     "layer %d (%s) reads layer %d (%s) across the cut; cuts are possible before "
                     "layers %s",
                     v, plan->desc->name, v, plan->layers[v].d.name, reader,
                     reader >= 0 ? plan->layers[reader].d.name : "?", reads,
                     reads >= 0 ? plan->layers[reads].d.name : "the input", cuts);
            rc = -1;
        } else {
            first[++count] = (int)v;
            p = *end ? end + 1 : end;
        }
    }
    if (rc == 0 && count != stages - 1) {
        snprintf(err, errlen, "--split: '%s' is not accepted: %d stages take %d indices", text,
                 stages, stages - 1);
        rc = -1;
    }
    first[stages] = n;
    free(cut_ok);
    return rc;
}
