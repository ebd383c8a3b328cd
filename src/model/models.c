/* models.c - the model zoo as data. Shapes follow the published definitions:
 *   LeNet: Caffe's MNIST example (examples/mnist/lenet_train_test.prototxt), 431,080 parameters.
 *   FCN-5 / FCN-8: DLBench's fully connected networks, 26752 -> 2048 x3 (x6) -> 26752.
 *   AlexNet: torchvision's single-column AlexNet (Krizhevsky 2014, "One weird trick"; 64-192-384-
 *     256-256 channels, 61,100,840 parameters) with the LRN of the 2012 paper after the first two
 *     convolutions (size 5, alpha 1e-4, beta 0.75, bias 2). Its CIFAR-10 variant (used for
 *     inputs of at most 32x32) is DLBench's: cuda-convnet's layers-18pct (Caffe's cifar10_full),
 *     89,578 parameters.
 *   VGG16: configuration D of Simonyan & Zisserman (torchvision vgg16), 138,357,544 parameters.
 *   GoogLeNet: Szegedy et al. 2014, Table 1, without the auxiliary classifiers (6,998,552).
 *   ResNet-50: He et al. 2015, bottleneck blocks, torchvision's resnet50 (stride in the 3x3
 *     convolution, "v1.5"), 25,557,032 parameters.
 *   LSTM-32 / LSTM-64: DLBench's LSTM (its TensorFlow and CNTK scripts, after Zaremba et al.'s PTB
 *     model): embedding 10000 x 256, two LSTM layers of 256 units, a 256 -> 10000 projection at
 * every position, sequences of 32 / 64 tokens, 6,180,624 parameters. With a real data set the input
 * and class count come from the data (e.g. FCN-5 on MNIST is 784 -> 2048 x3 -> 10); with --dataset
 * synthetic the native shape below is used. Pools written "3/2 pad 1" stand where Caffe's models
 * round the output size up: the sizes are the same. */
#include "model.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Rows. _IN variants name their inputs (comma-separated); the others read the previous row. */
#define ROW(kind_, name_, out_, k_, s_, p_)                                                        \
    .kind = kind_, .name = name_, .out = out_, .k = k_, .stride = s_, .pad = p_
#define CONV(name, out, k, s, p)                                                                   \
    { ROW(LAYER_CONV, name, out, k, s, p) }
#define CONV_IN(name, out, k, s, p, in)                                                            \
    { ROW(LAYER_CONV, name, out, k, s, p), .inputs = in }
#define CONV_NB(name, out, k, s, p)                                                                \
    { ROW(LAYER_CONV, name, out, k, s, p), .no_bias = 1 }
#define CONV_NB_IN(name, out, k, s, p, in)                                                         \
    { ROW(LAYER_CONV, name, out, k, s, p), .inputs = in, .no_bias = 1 }
#define FC(name, out)                                                                              \
    { ROW(LAYER_FC, name, out, 0, 0, 0) }
#define RELU(name)                                                                                 \
    { ROW(LAYER_RELU, name, 0, 0, 0, 0) }
#define MAXPOOL(name, k, s, p)                                                                     \
    { ROW(LAYER_MAXPOOL, name, 0, k, s, p) }
#define MAXPOOL_IN(name, k, s, p, in)                                                              \
    { ROW(LAYER_MAXPOOL, name, 0, k, s, p), .inputs = in }
#define AVGPOOL(name, k, s, p)                                                                     \
    { ROW(LAYER_AVGPOOL, name, 0, k, s, p) }
#define GLOBAL_AVGPOOL(name)                                                                       \
    { ROW(LAYER_GLOBAL_AVGPOOL, name, 0, 0, 0, 0) }
#define LRN(name, size, a, b, k)                                                                   \
    { ROW(LAYER_LRN, name, 0, size, 0, 0), .alpha = a, .beta = b, .bias = k }
#define BN(name)                                                                                   \
    { ROW(LAYER_BATCHNORM, name, 0, 0, 0, 0) }
#define DROPOUT(name, p)                                                                           \
    { ROW(LAYER_DROPOUT, name, 0, 0, 0, 0), .rate = p }
#define CONCAT(name, in)                                                                           \
    { ROW(LAYER_CONCAT, name, 0, 0, 0, 0), .inputs = in }
#define ADD(name, in)                                                                              \
    { ROW(LAYER_ADD, name, 0, 0, 0, 0), .inputs = in }
#define EMBEDDING(name, voc, dim)                                                                  \
    { ROW(LAYER_EMBEDDING, name, dim, 0, 0, 0), .vocab = voc }
#define LSTM(name, hidden)                                                                         \
    { ROW(LAYER_LSTM, name, hidden, 0, 0, 0) }

/* ---- LeNet, FCN-5, FCN-8 --------------------------------------------------------------------- */

static const LayerDesc LENET[] = {
    CONV("conv1", 20, 5, 1, 0), /* [20,24,24] */
    MAXPOOL("pool1", 2, 2, 0),  /* [20,12,12] */
    CONV("conv2", 50, 5, 1, 0), /* [50,8,8]   */
    MAXPOOL("pool2", 2, 2, 0),  /* [50,4,4]   */
    FC("ip1", 500),             /* [500]      */
    RELU("relu1"),              /* */
    FC("ip2", 0),               /* [classes] */
};
/* name, about, native input [c,h,w], classes, rows (then: vocab, small-image variant) */
#define MODEL(name_, about_, c_, h_, w_, classes_, rows_)                                          \
    .name = name_, .about = about_, .in_c = c_, .in_h = h_, .in_w = w_, .classes = classes_,       \
    .nlayers = COUNT(rows_), .layers = rows_
const ModelDesc model_lenet = {MODEL("lenet", "LeNet (Caffe MNIST example)", 1, 28, 28, 10, LENET)};

#define HIDDEN(i) FC("fc" #i, 2048), RELU("relu" #i)

static const LayerDesc FCN5[] = {HIDDEN(1), HIDDEN(2), HIDDEN(3), FC("fc4", 0)};
const ModelDesc model_fcn5 = {MODEL("fcn5", "FCN-5 (DLBench)", 26752, 1, 1, 26752, FCN5)};

static const LayerDesc FCN8[] = {HIDDEN(1), HIDDEN(2), HIDDEN(3),   HIDDEN(4),
                                 HIDDEN(5), HIDDEN(6), FC("fc7", 0)};
const ModelDesc model_fcn8 = {MODEL("fcn8", "FCN-8 (DLBench)", 26752, 1, 1, 26752, FCN8)};

/* ---- AlexNet --------------------------------------------------------------------------------- */

static const LayerDesc ALEXNET_CIFAR[] = {
    CONV("conv1", 32, 5, 1, 2),          /* [32,32,32] */
    MAXPOOL("pool1", 3, 2, 1),           /* [32,16,16] */
    RELU("relu1"),                       /* */
    LRN("norm1", 3, 5e-5f, 0.75f, 1.0f), /* */
    CONV("conv2", 32, 5, 1, 2),          /* [32,16,16] */
    RELU("relu2"),                       /* */
    MAXPOOL("pool2", 3, 2, 1),           /* [32,8,8] */
    LRN("norm2", 3, 5e-5f, 0.75f, 1.0f), /* */
    CONV("conv3", 64, 5, 1, 2),          /* [64,8,8] */
    RELU("relu3"),                       /* */
    AVGPOOL("pool3", 3, 2, 1),           /* [64,4,4] */
    FC("fc1", 0),                        /* [classes] */
};
static const ModelDesc model_alexnet_cifar = {
    MODEL("alexnet", "AlexNet, CIFAR-10 variant (DLBench: cuda-convnet layers-18pct)", 3, 32, 32,
          10, ALEXNET_CIFAR)};

static const LayerDesc ALEXNET[] = {
    CONV("conv1", 64, 11, 4, 2),         /* [64,55,55] */
    RELU("relu1"),                       /* */
    LRN("norm1", 5, 1e-4f, 0.75f, 2.0f), /* */
    MAXPOOL("pool1", 3, 2, 0),           /* [64,27,27] */
    CONV("conv2", 192, 5, 1, 2),         /* [192,27,27] */
    RELU("relu2"),                       /* */
    LRN("norm2", 5, 1e-4f, 0.75f, 2.0f), /* */
    MAXPOOL("pool2", 3, 2, 0),           /* [192,13,13] */
    CONV("conv3", 384, 3, 1, 1),         /* [384,13,13] */
    RELU("relu3"),                       /* */
    CONV("conv4", 256, 3, 1, 1),         /* [256,13,13] */
    RELU("relu4"),                       /* */
    CONV("conv5", 256, 3, 1, 1),         /* [256,13,13] */
    RELU("relu5"),                       /* */
    MAXPOOL("pool5", 3, 2, 0),           /* [256,6,6] */
    DROPOUT("drop6", 0.5f),              /* */
    FC("fc6", 4096),                     /* [4096] */
    RELU("relu6"),                       /* */
    DROPOUT("drop7", 0.5f),              /* */
    FC("fc7", 4096),                     /* [4096] */
    RELU("relu7"),                       /* */
    FC("fc8", 0),                        /* [classes] */
};
const ModelDesc model_alexnet = {MODEL("alexnet",
                                       "AlexNet (torchvision layout, LRN as in the 2012 paper)", 3,
                                       224, 224, 1000, ALEXNET),
                                 .small = &model_alexnet_cifar};

/* ---- VGG16 ----------------------------------------------------------------------------------- */

#define VGG_CONV(n, out) CONV("conv" n, out, 3, 1, 1), RELU("relu" n)
static const LayerDesc VGG16[] = {
    VGG_CONV("1_1", 64),
    VGG_CONV("1_2", 64),
    MAXPOOL("pool1", 2, 2, 0), /* [64,112,112] */
    VGG_CONV("2_1", 128),
    VGG_CONV("2_2", 128),
    MAXPOOL("pool2", 2, 2, 0), /* [128,56,56] */
    VGG_CONV("3_1", 256),
    VGG_CONV("3_2", 256),
    VGG_CONV("3_3", 256),      /* */
    MAXPOOL("pool3", 2, 2, 0), /* [256,28,28] */
    VGG_CONV("4_1", 512),
    VGG_CONV("4_2", 512),
    VGG_CONV("4_3", 512),      /* */
    MAXPOOL("pool4", 2, 2, 0), /* [512,14,14] */
    VGG_CONV("5_1", 512),
    VGG_CONV("5_2", 512),
    VGG_CONV("5_3", 512),      /* */
    MAXPOOL("pool5", 2, 2, 0), /* [512,7,7] */
    FC("fc6", 4096),
    RELU("relu6"),
    DROPOUT("drop6", 0.5f), /* */
    FC("fc7", 4096),
    RELU("relu7"),
    DROPOUT("drop7", 0.5f), /* */
    FC("fc8", 0),           /* [classes] */
};
const ModelDesc model_vgg16 = {MODEL("vgg16", "VGG16 (configuration D)", 3, 224, 224, 1000, VGG16)};

/* ---- GoogLeNet ------------------------------------------------------------------------------- */

/* One inception module (Table 1 of the paper): four branches on the module input `in`, joined by
 * channel concatenation into row P "/output". Every convolution is followed by a ReLU. */
#define INCEPTION(P, in, n1x1, n3x3r, n3x3, n5x5r, n5x5, pool_proj)                                \
    CONV_IN(P "/1x1", n1x1, 1, 1, 0, in), RELU(P "/relu_1x1"),                                     \
        CONV_IN(P "/3x3_reduce", n3x3r, 1, 1, 0, in), RELU(P "/relu_3x3_reduce"),                  \
        CONV(P "/3x3", n3x3, 3, 1, 1), RELU(P "/relu_3x3"),                                        \
        CONV_IN(P "/5x5_reduce", n5x5r, 1, 1, 0, in), RELU(P "/relu_5x5_reduce"),                  \
        CONV(P "/5x5", n5x5, 5, 1, 2), RELU(P "/relu_5x5"), MAXPOOL_IN(P "/pool", 3, 1, 1, in),    \
        CONV(P "/pool_proj", pool_proj, 1, 1, 0), RELU(P "/relu_pool_proj"),                       \
        CONCAT(P "/output", P "/relu_1x1," P "/relu_3x3," P "/relu_5x5," P "/relu_pool_proj")

static const LayerDesc GOOGLENET[] = {
    CONV("conv1/7x7_s2", 64, 7, 2, 3),                                           /* [64,112,112] */
    RELU("conv1/relu_7x7"),                                                      /* */
    MAXPOOL("pool1/3x3_s2", 3, 2, 1),                                            /* [64,56,56] */
    LRN("pool1/norm1", 5, 1e-4f, 0.75f, 1.0f),                                   /* */
    CONV("conv2/3x3_reduce", 64, 1, 1, 0),                                       /* */
    RELU("conv2/relu_3x3_reduce"),                                               /* */
    CONV("conv2/3x3", 192, 3, 1, 1),                                             /* [192,56,56] */
    RELU("conv2/relu_3x3"),                                                      /* */
    LRN("conv2/norm2", 5, 1e-4f, 0.75f, 1.0f),                                   /* */
    MAXPOOL("pool2/3x3_s2", 3, 2, 1),                                            /* [192,28,28] */
    INCEPTION("inception_3a", "pool2/3x3_s2", 64, 96, 128, 16, 32, 32),          /* [256,28,28] */
    INCEPTION("inception_3b", "inception_3a/output", 128, 128, 192, 32, 96, 64), /* [480] */
    MAXPOOL("pool3/3x3_s2", 3, 2, 1),                                            /* [480,14,14] */
    INCEPTION("inception_4a", "pool3/3x3_s2", 192, 96, 208, 16, 48, 64),         /* [512] */
    INCEPTION("inception_4b", "inception_4a/output", 160, 112, 224, 24, 64, 64), /* [512] */
    INCEPTION("inception_4c", "inception_4b/output", 128, 128, 256, 24, 64, 64), /* [512] */
    INCEPTION("inception_4d", "inception_4c/output", 112, 144, 288, 32, 64, 64), /* [528] */
    INCEPTION("inception_4e", "inception_4d/output", 256, 160, 320, 32, 128, 128), /* [832] */
    MAXPOOL("pool4/3x3_s2", 3, 2, 1),                                              /* [832,7,7] */
    INCEPTION("inception_5a", "pool4/3x3_s2", 256, 160, 320, 32, 128, 128),        /* [832] */
    INCEPTION("inception_5b", "inception_5a/output", 384, 192, 384, 48, 128, 128), /* [1024] */
    GLOBAL_AVGPOOL("pool5/7x7_s1"),                                                /* [1024,1,1] */
    DROPOUT("pool5/drop_7x7_s1", 0.4f),                                            /* */
    FC("loss3/classifier", 0),                                                     /* [classes] */
};
const ModelDesc model_googlenet = {MODEL("googlenet",
                                         "GoogLeNet (Szegedy et al. 2014, no auxiliary heads)", 3,
                                         224, 224, 1000, GOOGLENET)};

/* ---- ResNet-50 ------------------------------------------------------------------------------- */

/* A bottleneck block on input `in`: 1x1 (mid) - 3x3 (mid, stride s) - 1x1 (out), each convolution
 * followed by batch norm, ReLU after the first two; the shortcut is `in` itself, or (first block of
 * a stage) a strided 1x1 convolution and batch norm; ReLU after the sum. Output row: P ".relu". */
#define BOTTLENECK_BODY(P, in, mid, out, s)                                                        \
    CONV_NB_IN(P ".conv1", mid, 1, 1, 0, in), BN(P ".bn1"), RELU(P ".relu1"),                      \
        CONV_NB(P ".conv2", mid, 3, s, 1), BN(P ".bn2"), RELU(P ".relu2"),                         \
        CONV_NB(P ".conv3", out, 1, 1, 0), BN(P ".bn3")
#define BOTTLENECK(P, in, mid, out)                                                                \
    BOTTLENECK_BODY(P, in, mid, out, 1), ADD(P ".add", P ".bn3," in), RELU(P ".relu")
#define BOTTLENECK_DOWN(P, in, mid, out, s)                                                        \
    BOTTLENECK_BODY(P, in, mid, out, s), CONV_NB_IN(P ".downsample", out, 1, s, 0, in),            \
        BN(P ".downsample_bn"), ADD(P ".add", P ".bn3," P ".downsample_bn"), RELU(P ".relu")

static const LayerDesc RESNET50[] = {
    CONV_NB("conv1", 64, 7, 2, 3),                              /* [64,112,112] */
    BN("bn1"),                                                  /* */
    RELU("relu"),                                               /* */
    MAXPOOL("maxpool", 3, 2, 1),                                /* [64,56,56] */
    BOTTLENECK_DOWN("layer1.0", "maxpool", 64, 256, 1),         /* [256,56,56] */
    BOTTLENECK("layer1.1", "layer1.0.relu", 64, 256),           /* */
    BOTTLENECK("layer1.2", "layer1.1.relu", 64, 256),           /* */
    BOTTLENECK_DOWN("layer2.0", "layer1.2.relu", 128, 512, 2),  /* [512,28,28] */
    BOTTLENECK("layer2.1", "layer2.0.relu", 128, 512),          /* */
    BOTTLENECK("layer2.2", "layer2.1.relu", 128, 512),          /* */
    BOTTLENECK("layer2.3", "layer2.2.relu", 128, 512),          /* */
    BOTTLENECK_DOWN("layer3.0", "layer2.3.relu", 256, 1024, 2), /* [1024,14,14] */
    BOTTLENECK("layer3.1", "layer3.0.relu", 256, 1024),         /* */
    BOTTLENECK("layer3.2", "layer3.1.relu", 256, 1024),         /* */
    BOTTLENECK("layer3.3", "layer3.2.relu", 256, 1024),         /* */
    BOTTLENECK("layer3.4", "layer3.3.relu", 256, 1024),         /* */
    BOTTLENECK("layer3.5", "layer3.4.relu", 256, 1024),         /* */
    BOTTLENECK_DOWN("layer4.0", "layer3.5.relu", 512, 2048, 2), /* [2048,7,7] */
    BOTTLENECK("layer4.1", "layer4.0.relu", 512, 2048),         /* */
    BOTTLENECK("layer4.2", "layer4.1.relu", 512, 2048),         /* */
    GLOBAL_AVGPOOL("avgpool"),                                  /* [2048,1,1] */
    FC("fc", 0),                                                /* [classes] */
};
const ModelDesc model_resnet50 = {
    MODEL("resnet50", "ResNet-50 (torchvision resnet50)", 3, 224, 224, 1000, RESNET50)};

/* ---- ResNet-8 ------------------------------------------------------------------------------- */

/* He et al. 2015's CIFAR-10 ResNet with n = 1 (6n+2 = 8 layers): 16-32-64 channels on 32x32,
 * basic blocks (two 3x3 convolutions with batch norm), projection shortcuts (1x1 convolution and
 * batch norm) where the shape changes, 78,042 parameters: small enough to train against PyTorch
 * in a test (tests/test_vs_torch.sh). */
#define BASIC_BODY(P, in, out, s)                                                                  \
    CONV_NB_IN(P ".conv1", out, 3, s, 1, in), BN(P ".bn1"), RELU(P ".relu1"),                      \
        CONV_NB(P ".conv2", out, 3, 1, 1), BN(P ".bn2")
#define BASIC(P, in, out) BASIC_BODY(P, in, out, 1), ADD(P ".add", P ".bn2," in), RELU(P ".relu")
#define BASIC_DOWN(P, in, out, s)                                                                  \
    BASIC_BODY(P, in, out, s), CONV_NB_IN(P ".downsample", out, 1, s, 0, in),                      \
        BN(P ".downsample_bn"), ADD(P ".add", P ".bn2," P ".downsample_bn"), RELU(P ".relu")

static const LayerDesc RESNET8[] = {
    CONV_NB("conv1", 16, 3, 1, 1),                  /* [16,32,32] */
    BN("bn1"),                                      /* */
    RELU("relu"),                                   /* */
    BASIC("layer1.0", "relu", 16),                  /* [16,32,32] */
    BASIC_DOWN("layer2.0", "layer1.0.relu", 32, 2), /* [32,16,16] */
    BASIC_DOWN("layer3.0", "layer2.0.relu", 64, 2), /* [64,8,8] */
    GLOBAL_AVGPOOL("avgpool"),                      /* [64,1,1] */
    FC("fc", 0),                                    /* [classes] */
};
const ModelDesc model_resnet8 = {
    MODEL("resnet8", "ResNet-8 (He et al. 2015, CIFAR-10, n = 1)", 3, 32, 32, 10, RESNET8)};

/* ---- LSTM-32, LSTM-64 ------------------------------------------------------------------------ */

static const LayerDesc LSTM_LM[] = {
    EMBEDDING("embedding", 10000, 256), /* [seq,1,256] */
    LSTM("lstm1", 256),                 /* [seq,1,256] */
    LSTM("lstm2", 256),                 /* [seq,1,256] */
    FC("softmax", 0),                   /* [seq,1,10000]: logits of the next token */
};
const ModelDesc model_lstm32 = {
    MODEL("lstm32", "LSTM-32 (DLBench: 2 x 256 LSTM, PTB vocabulary)", 1, 1, 32, 10000, LSTM_LM),
    .vocab = 10000};
const ModelDesc model_lstm64 = {
    MODEL("lstm64", "LSTM-64 (DLBench: 2 x 256 LSTM, PTB vocabulary)", 1, 1, 64, 10000, LSTM_LM),
    .vocab = 10000};
