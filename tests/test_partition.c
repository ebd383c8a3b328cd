/* test_partition.c - pipeline cuts (src/model/partition.c): where each model can be cut (every row
 * of LeNet; GoogLeNet only between inception modules; ResNet-50 never inside a block), the
 * FLOPs-balanced split of GoogLeNet into 2 and 3 stages against brute force, and --split's
 * errors. */
#include "harness.h"
#include "model.h"
#include "partition.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern const ModelDesc model_lenet, model_googlenet, model_resnet50;

static void test_partition(void) {
    Model m;
    char text[400];
    int cut_ok[400];
    model_plan(&m, &model_lenet, 1, 28, 28, 10, 1);
    EXPECT(partition_cuts(&m, cut_ok) == 6, "lenet: every cut possible");
    model_free(&m);

    model_plan(&m, &model_googlenet, 3, 224, 224, 1000, 1);
    partition_cuts(&m, cut_ok);
    partition_cuts_text(&m, text, sizeof text);
    printf("googlenet cuts: %s\n", text);
    /* row 10 is inception_3a's first branch: a cut before it leaves only pool2's output crossing;
     * a cut inside the module would leave that output crossing beside a branch's */
    EXPECT(cut_ok[10] && !cut_ok[11] && !cut_ok[23] && cut_ok[24], "googlenet cuts around 3a");
    for (int s = 1; s < m.nlayers; s++)
        if (cut_ok[s]) {
            const Layer *L = &m.layers[s];
            EXPECT(strstr(L->d.name, "inception") == NULL || strstr(L->d.name, "/1x1"),
                   "googlenet: the cut before %s is outside the modules", L->d.name);
        }
    /* balanced splits against brute force over the possible cuts */
    for (int K = 2; K <= 3; K++) {
        int first[4];
        EXPECT(partition_balance(&m, K, first) == 0, "googlenet balances %d stages", K);
        double got = 0;
        for (int k = 0; k < K; k++) {
            EXPECT(first[k] < first[k + 1] && (k == 0 || cut_ok[first[k]]),
                   "googlenet, %d stages: stage %d starts at a possible cut", K, k);
            got = fmax(got, partition_flops(&m, first[k], first[k + 1]));
        }
        double best = 1e300;
        for (int a = 1; a < m.nlayers; a++) {
            if (!cut_ok[a]) continue;
            if (K == 2) {
                best =
                    fmin(best, fmax(partition_flops(&m, 0, a), partition_flops(&m, a, m.nlayers)));
                continue;
            }
            for (int b = a + 1; b < m.nlayers; b++)
                if (cut_ok[b])
                    best = fmin(best, fmax(partition_flops(&m, 0, a),
                                           fmax(partition_flops(&m, a, b),
                                                partition_flops(&m, b, m.nlayers))));
        }
        printf("googlenet, %d stages: largest stage %.4g FLOPs (brute force %.4g)\n", K, got, best);
        EXPECT(fabs(got - best) <= 1e-9 * best, "googlenet K=%d: the balanced split is optimal", K);
    }
    char err[1024];
    int first[4];
    EXPECT(partition_parse(&m, "24", 2, first, err, sizeof err) == 0 && first[1] == 24,
           "--split 24");
    EXPECT(partition_parse(&m, "12", 2, first, err, sizeof err) != 0 &&
               strstr(err, "--split: 12 is not accepted") && strstr(err, "cannot be cut"),
           "--split 12: %s", err);
    printf("--split 12 on googlenet: %s\n", err);
    EXPECT(partition_parse(&m, "38,24", 3, first, err, sizeof err) != 0 && strstr(err, "increase"),
           "--split 38,24: %s", err);
    EXPECT(partition_parse(&m, "24", 3, first, err, sizeof err) != 0 &&
               strstr(err, "3 stages take 2"),
           "--split 24 with 3 stages: %s", err);
    EXPECT(partition_parse(&m, "x", 2, first, err, sizeof err) != 0, "--split x refused");
    model_free(&m);

    model_plan(&m, &model_resnet50, 3, 224, 224, 1000, 1);
    partition_cuts(&m, cut_ok);
    for (int s = 1; s < m.nlayers; s++) {
        const char *name = m.layers[s].d.name;
        int inside = strstr(name, ".conv2") || strstr(name, ".bn3") || strstr(name, ".downsample");
        EXPECT(!(cut_ok[s] && inside), "resnet50: no cut inside a block before %s", name);
    }
    model_free(&m);
    printf("pipeline cuts checked\n");
}

int main(void) {
    test_partition();
    return check_summary();
}
