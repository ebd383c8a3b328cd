/* test_loss_scaler.c - fp16's dynamic loss scaler (src/run/precision.c) against GradScaler's rules,
 * and the --precision names. Each check prints what it expected and got; exit 1 on any failure. */
#include "harness.h"
#include "precision.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void expect(const char *what, double got, double want) {
    EXPECT(got == want, "%-50s got %-10g expected %g", what, got, want);
}

int main(void) {
    LossScaler s;
    loss_scaler_init(&s);
    expect("initial scale (GradScaler init_scale)", s.scale, 65536.0);
    expect("growth interval", s.interval, 2000);

    /* overflow: the step is skipped, the scale halves, the count of good steps restarts */
    expect("overflow -> skip", loss_scaler_update(&s, 1), 1);
    expect("scale after one overflow", s.scale, 32768.0);
    expect("skipped steps", (double)s.skipped, 1);
    expect("two overflows in a row -> skip", loss_scaler_update(&s, 1), 1);
    expect("scale after two overflows", s.scale, 16384.0);

    /* 1999 good steps: no growth; the 2000th doubles the scale */
    int skips = 0;
    for (int i = 0; i < 1999; i++)
        skips += loss_scaler_update(&s, 0);
    expect("good steps are never skipped", skips, 0);
    expect("scale after 1999 good steps", s.scale, 16384.0);
    loss_scaler_update(&s, 0);
    expect("scale after 2000 good steps", s.scale, 32768.0);

    /* an overflow in the middle restarts the count */
    for (int i = 0; i < 1500; i++)
        loss_scaler_update(&s, 0);
    loss_scaler_update(&s, 1);
    expect("overflow after 1500 good steps: backoff", s.scale, 16384.0);
    for (int i = 0; i < 1999; i++)
        loss_scaler_update(&s, 0);
    expect("1999 good steps after that overflow: no growth", s.scale, 16384.0);
    loss_scaler_update(&s, 0);
    expect("the 2000th: growth", s.scale, 32768.0);
    expect("skipped steps in all", (double)s.skipped, 3);

    /* growth never makes the scale infinite */
    s.scale = 1e308, s.good = 0;
    for (int i = 0; i < 2000; i++)
        loss_scaler_update(&s, 0);
    expect("growth stops below infinity", s.scale, 1e308);

    /* names: the one list (PRECISION_NAMES) names the enum's values in its order */
    expect("names_find(bf16)", names_find(PRECISION_NAMES, "bf16"), PRECISION_BF16);
    expect("names_find(fp16)", names_find(PRECISION_NAMES, "fp16"), PRECISION_FP16);
    expect("names_find(fp64)", names_find(PRECISION_NAMES, "fp64"), -1);
    expect("names_find(fp1)", names_find(PRECISION_NAMES, "fp1"), -1);
    expect("names round trip", strcmp(PRECISION_NAME(PRECISION_TF32), "tf32"), 0);
    expect("first name", strcmp(PRECISION_NAME(PRECISION_FP32), "fp32"), 0);
    expect("last name", strcmp(PRECISION_NAME(PRECISION_FP16), "fp16"), 0);
    expect("no such value", strcmp(PRECISION_NAME(4), "?"), 0);
    expect("fp16 scales its loss", precision_loss_scaling(PRECISION_FP16), 1);
    expect("bf16 does not", precision_loss_scaling(PRECISION_BF16), 0);
    return check_summary();
}
