/* models.c - the model zoo as data. Shapes follow the published definitions:
 *   LeNet: Caffe's MNIST example (examples/mnist/lenet_train_test.prototxt), 431,080 parameters.
 *   FCN-5 / FCN-8: DLBench's fully connected networks, 26752 -> 2048 x3 (x6) -> 26752.
 * With a real data set the input and class count come from the data (e.g. FCN-5 on MNIST is
 * 784 -> 2048 x3 -> 10); with --dataset synthetic the native shape below is used. */
#include "model.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const LayerDesc LENET[] = {
    {LAYER_CONV, "conv1", 20, 5, 1, 0},                                  /* [20,24,24] */
    {LAYER_MAXPOOL, "pool1", 0, 2, 2, 0},                                /* [20,12,12] */
    {LAYER_CONV, "conv2", 50, 5, 1, 0},                                  /* [50,8,8]   */
    {LAYER_MAXPOOL, "pool2", 0, 2, 2, 0},                                /* [50,4,4]   */
    {LAYER_FC, "ip1", 500, 0, 0, 0},                                     /* [500]      */
    {LAYER_RELU, "relu1", 0, 0, 0, 0},    {LAYER_FC, "ip2", 0, 0, 0, 0}, /* [classes] */
};
const ModelDesc model_lenet = {"lenet", "LeNet (Caffe MNIST example)", 1, 28, 28, 10, COUNT(LENET),
                               LENET};

#define HIDDEN(i)                                                                                  \
    {LAYER_FC, "fc" #i, 2048, 0, 0, 0}, {                                                          \
        LAYER_RELU, "relu" #i, 0, 0, 0, 0                                                          \
    }

static const LayerDesc FCN5[] = {HIDDEN(1), HIDDEN(2), HIDDEN(3), {LAYER_FC, "fc4", 0, 0, 0, 0}};
const ModelDesc model_fcn5 = {"fcn5", "FCN-5 (DLBench)", 26752, 1, 1, 26752, COUNT(FCN5), FCN5};

static const LayerDesc FCN8[] = {HIDDEN(1),
                                 HIDDEN(2),
                                 HIDDEN(3),
                                 HIDDEN(4),
                                 HIDDEN(5),
                                 HIDDEN(6),
                                 {LAYER_FC, "fc7", 0, 0, 0, 0}};
const ModelDesc model_fcn8 = {"fcn8", "FCN-8 (DLBench)", 26752, 1, 1, 26752, COUNT(FCN8), FCN8};
