/* test_loss_scaler.c - fp16's dynamic loss scaler (src/precision.c) against GradScaler's rules, and
 * the --precision names. Each check prints what it expected and got; exit 1 on any failure. */
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

    /* names */
    expect("precision_from_name(bf16)", precision_from_name("bf16"), PRECISION_BF16);
    expect("precision_from_name(fp16)", precision_from_name("fp16"), PRECISION_FP16);
    expect("precision_from_name(fp64)", precision_from_name("fp64"), -1);
    expect("names round trip", strcmp(precision_name(PRECISION_TF32), "tf32"), 0);
    return check_summary();
}
