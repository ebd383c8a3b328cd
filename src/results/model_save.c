/* model_save.c - the parameter file written by --save-model (model.h), through the one write path
 * of dtbench (outputs.h); in the program only, not in the model's test programs. */
#include "model.h"
#include "outputs.h"
#include "alloc.h" /* defines: xmalloc */

#include <stdlib.h>
#include <string.h>

/* The parameter file: a 64-byte header ("DTBMODEL", version 1, the float count, the model's
 * name), then the floats, through the one write path (outputs.h). 0 when saved; a failure is
 * reported there (one line, exit status 1, no file left) and returns 0 too: nothing is left for
 * the caller to say. */
static int save_floats(const Model *m, const float *host, size_t n) {
    unsigned char header[64] = "DTBMODEL";
    uint64_t version = 1, count = n;
    memcpy(header + 8, &version, 8);
    memcpy(header + 16, &count, 8);
    snprintf((char *)header + 24, 40, "%s", m->desc->name);
    (void)outputs_save_model(header, sizeof header, host, n * sizeof(float));
    return 0;
}

int model_save(const Model *m, const char *path) {
    (void)path; /* claimed by outputs_claim: the file --save-model names */
    float *host = xmalloc(m->nparams * sizeof(float));
    m->be->download(m->ctx, host, m->params, m->nparams * sizeof(float));
    int rc = save_floats(m, host, m->nparams);
    free(host);
    return rc;
}

int model_save_params(const Model *m, const float *host_params, const char *path) {
    (void)path;
    return save_floats(m, host_params, m->total_params);
}
