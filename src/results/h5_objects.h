/* h5_objects.h - the small HDF5 writers the recorder's files share (src/results/h5_objects.c):
 * scalar attributes and datasets allocated and filled at creation. Every call is checked (H5_CHECK,
 * h5_check.h: a failure ends the job); collective where the file is parallel. */
#ifndef DTBENCH_H5_OBJECTS_H
#define DTBENCH_H5_OBJECTS_H

#include <hdf5.h>

/* A scalar UTF-8 string attribute of any length. */
void attr_text(hid_t loc, const char *name, const char *value);
/* A scalar attribute of `type`, stored as that type. */
void attr_number(hid_t loc, const char *name, hid_t type, const void *value);
void attr_ll(hid_t loc, const char *name, long long v);

/* A contiguous dataset allocated and filled (fill: NULL for HDF5's zero) at creation, so that no
 * metadata changes later. */
hid_t create_set(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                 const void *fill);

#endif
