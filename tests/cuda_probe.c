/* cuda_probe.c - prints the number of visible CUDA devices; exit status 0 when there is one,
 * 77 (the test harness's "skipped") when there is none. Used by the GPU shell tests; built with
 * the CUDA backend only (without it, those tests skip because the probe does not exist). */
#include "cuda.h"

#include <stdio.h>

int main(void) {
    int n = cuda_device_count();
    printf("%d\n", n);
    return n > 0 ? 0 : 77;
}
