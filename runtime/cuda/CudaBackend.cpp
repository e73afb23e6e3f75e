//===- CudaBackend.cpp - The cuDNN/cuBLAS kernel backend ------------------===//
//
// createCudaBackend(): device memory, one compute stream that every kernel,
// copy and optimizer update of the backend is issued on (so they run in plan
// order without host synchronization), graph capture, and the registry of
// every op's factory. The factories live one op family per file, as in the
// CPU backend (CudaBackend.h lists them): cuBLAS for Gemm/GemmGrad/MatMul,
// cuDNN for convolutions and BatchNorm (DnnKernels.cpp), and the
// hand-written kernels of CudaKernels.cu and CudaPointwise.cu for the rest.
// Op names, operand conventions and checks follow the CPU backend
// (runtime/cpu); an op it does not implement is an error naming the node.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace oasr::rt::cuda {

void checkBlas(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  std::fprintf(stderr, "oasr: fatal: %s: cuBLAS error %s\n", what,
               cublasGetStatusName(status));
  std::abort();
}

void checkDnn(cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS)
    return;
  std::fprintf(stderr, "oasr: fatal: %s: %s\n", what,
               cudnnGetErrorString(status));
  std::abort();
}

/// The convolutions' math: FP32 FMA (f32, matching the CPU backend and
/// PyTorch's FP32 reference) unless the step is compiled for tf32, where
/// cuDNN may use TF32 tensor cores. Set by CudaBackend::setPrecision before
/// any kernel is created (one backend per process).
cudnnMathType_t gConvMath = CUDNN_FMA_MATH;

/// Every kernel of the backend: the one list the backend and
/// cudaKernelOps() use (no device needed).
static void registerCudaKernels(std::map<std::string, Factory> &r) {
  for (const char *op :
       {"Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Elu",
        "LeakyRelu", "HardSigmoid", "HardSwish", "Mish", "Reciprocal", "Gelu"})
    r[op] = createUnary;
  for (const char *op :
       {"SigmoidGrad", "TanhGrad", "EluGrad", "LeakyReluGrad",
        "HardSigmoidGrad", "HardSwishGrad", "MishGrad", "GeluGrad", "ClipGrad"})
    r[op] = createGradOp;
  for (const char *op : {"Equal", "Less", "Greater", "LessOrEqual",
                         "GreaterOrEqual", "And", "Or", "Xor"})
    r[op] = createCompare;
  r["Not"] = createNot;
  r["Where"] = createWhere;
  r["Cast"] = createCast;
  r["Shape"] = createShape;
  r["ConstantOfShape"] = createConstantOfShape;
  r["Range"] = createRange;
  r["Trilu"] = createTrilu;
  r["Transpose"] = createTranspose;
  r["Gather"] = createGather;
  r["ScatterND"] = createScatterND;
  r["GatherGrad"] = createGather;
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r[op] = createSoftmax;
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
  r["ReduceSumTo"] = createReduceSumTo;
  r["Expand"] = createExpand;
  r["Concat"] = createConcatSplit;
  r["Split"] = createConcatSplit;
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Sum"})
    r[op] = createNary;
  r["Neg"] = createNeg;
  r["ReduceMean"] = createReduce;
  r["ReduceSum"] = createReduce;
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r[op] = createCopy;
  r["Constant"] = createConstant;
  r["Relu"] = createRelu;
  r["ReluGrad"] = createRelu;
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
  r["Gemm"] = createGemm;
  r["GemmGrad"] = createGemmGrad;
  r["MatMul"] = createMatMul;
  r["FusedMatMul"] = createMatMul;
  for (const char *op :
       {"Conv", "ConvGrad", "ConvTranspose", "ConvTransposeGrad"})
    r[op] = createConv;
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["AveragePool"] = createAvgPool;
  r["AveragePoolGrad"] = createAvgPool;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
  r["Pad"] = createPad;
  r["PadGrad"] = createPadGrad;
  r["Slice"] = createSlice;
  r["SliceGrad"] = createSliceGrad;
  r["Clip"] = createClip;
  r["Resize"] = createResize;
  r["ResizeGrad"] = createResize;
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
  r["BatchNormalization"] = createBatchNorm;
  r["BatchNormalizationGrad"] = createBatchNormGrad;
}

CudaBackend::CudaBackend(cudaStream_t stream, cublasHandle_t blas,
                         cudnnHandle_t dnn)
    : stream(stream), blas(blas), dnn(dnn) {
  registerCudaKernels(registry);
  if (const char *path = std::getenv("OASR_CUDA_KERNEL_TIMES")) {
    timesPath = path;
    times = std::make_unique<std::map<std::string, OpTime>>();
  }
}

cudaStream_t computeStream(KernelBackend &backend) {
  return static_cast<CudaBackend &>(backend).stream;
}

} // namespace oasr::rt::cuda

namespace oasr::rt {

int cudaDeviceCount(std::string &error) {
  int n = 0;
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    error = std::string(cudaGetErrorString(status)) + " (" +
            cudaGetErrorName(status) + ")";
    cudaGetLastError();
    return 0;
  }
  if (n == 0)
    error = "cudaGetDeviceCount found 0 devices";
  return n;
}

std::string cudaDeviceDescription(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "?";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", prop.name,
                prop.major, prop.minor,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

bool selectCudaDevice(int device, std::string &error) {
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess)
    return true;
  error = "cudaSetDevice(" + std::to_string(device) +
          "): " + cudaGetErrorString(status);
  cudaGetLastError();
  return false;
}

std::vector<std::string> cudaKernelOps() {
  std::map<std::string, cuda::Factory> registry;
  cuda::registerCudaKernels(registry);
  std::vector<std::string> ops;
  for (const auto &entry : registry)
    ops.push_back(entry.first);
  return ops;
}

std::unique_ptr<KernelBackend> createCudaBackend(std::string &error) {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  cudaError_t cs = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (cs != cudaSuccess) {
    error =
        std::string("cannot create a CUDA stream: ") + cudaGetErrorString(cs);
    cudaGetLastError();
    return nullptr;
  }
  cublasStatus_t bs = cublasCreate(&blas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasCreate failed: ") + cublasGetStatusName(bs);
    cudaStreamDestroy(stream);
    return nullptr;
  }
  cudnnStatus_t ds = cudnnCreate(&dnn);
  if (ds != CUDNN_STATUS_SUCCESS) {
    error = std::string("cudnnCreate failed: ") + cudnnGetErrorString(ds);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return nullptr;
  }
  cuda::checkBlas(cublasSetStream(blas, stream), "cublasSetStream");
  // FP32 products stay FP32 (no TF32), as on the CPU backend.
  cuda::checkBlas(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH),
                  "cublasSetMathMode");
  cuda::checkDnn(cudnnSetStream(dnn, stream), "cudnnSetStream");
  return std::make_unique<cuda::CudaBackend>(stream, blas, dnn);
}

} // namespace oasr::rt
