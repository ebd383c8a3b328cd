/* cuda_grid.h - the launch geometry shared by dtbench's CUDA kernels
 * (kernels/cuda/cuda_*_kernels.cu):
 * 256-thread blocks, a grid-stride loop over n elements, and the number of blocks that fills the
 * GPU for it (never zero, so a launch over nothing is still valid). CUDA-only header, included
 * only by .cu files. */
#ifndef DTBENCH_CUDA_GRID_H
#define DTBENCH_CUDA_GRID_H

#include <stddef.h>

#define THREADS 256

/* Blocks for a grid-stride loop over n elements: one per THREADS elements, at most 65535 * 8. */
static inline unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return b ? (unsigned)b : 1u;
}

/* for (i = this thread's first element; i < n; i += every thread of the grid) */
#define GRID_LOOP(i, n)                                                                           \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (size_t)gridDim.x * blockDim.x)

#endif
