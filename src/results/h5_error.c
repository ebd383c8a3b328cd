/* h5_error.c - the HDF5 error text that H5_CHECK (h5_check.h) and the recorder's write-error lines
 * report: the outermost API call and the innermost description of HDF5's error stack (automatic
 * stack printing is switched off in recorder_hdf5.c). */
#include "h5_check.h"

#include <hdf5.h>
#include <stdio.h>

typedef struct {
    char api[64], desc[400];
} H5Msg;

static herr_t h5_walk(unsigned n, const H5E_error2_t *e, void *data) {
    H5Msg *m = data;
    if (n == 0) snprintf(m->api, sizeof m->api, "%s", e->func_name);
    snprintf(m->desc, sizeof m->desc, "%s", e->desc); /* keep the innermost */
    return 0;
}

const char *h5_error_message(void) {
    static char text[512];
    H5Msg m = {"", "no HDF5 error on the stack"};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_walk, &m);
    snprintf(text, sizeof text, "HDF5 %s: %s", m.api, m.desc);
    return text;
}
