//===- CudaBackend.cpp - The cuDNN/cuBLAS kernel backend ------------------===//
//
// createCudaBackend(): device memory, one compute stream that every kernel,
// copy and optimizer update of the backend is issued on (so they run in plan
// order without host synchronization), graph capture, and the registry of
// every op's factory. The factories live one op family per file, with the
// CPU backend's file names (CudaBackend.h lists them): cuBLAS for
// Gemm/GemmGrad/MatMul (GemmKernels.cpp), cuDNN for convolutions
// (ConvKernels.cpp) and BatchNorm (NormKernels.cpp), and the hand-written
// kernels of CudaKernels.cu and CudaPointwise.cu for the rest.
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
  if (status != CUBLAS_STATUS_SUCCESS)
    fatalKernelError(std::string(what) + ": cuBLAS error " +
                     cublasGetStatusName(status));
}

void checkDnn(cudnnStatus_t status, const char *what) {
  if (status != CUDNN_STATUS_SUCCESS)
    fatalKernelError(std::string(what) + ": " + cudnnGetErrorString(status));
}

/// The convolutions' math: FP32 FMA (f32, matching the CPU backend and
/// PyTorch's FP32 reference) unless the step is compiled for tf32, where
/// cuDNN may use TF32 tensor cores. Set by CudaBackend::setPrecision before
/// any kernel is created (one backend per process).
cudnnMathType_t gConvMath = CUDNN_FMA_MATH;

/// Every family's kernels: the one list the backend and cudaKernelOps() use
/// (no device needed).
static void registerCudaKernels(FactoryRegistry &registry) {
  registerConvKernels(registry);
  registerGemmKernels(registry);
  registerNormKernels(registry);
  registerPoolKernels(registry);
  registerDropoutKernels(registry);
  registerLossKernels(registry);
  registerPointwiseKernels(registry);
  registerShapeKernels(registry);
  registerArithmeticKernels(registry);
  registerLowPrecisionKernels(registry);
  registerAttentionKernels(registry);
  registerIndexKernels(registry);
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
  cuda::FactoryRegistry registry;
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
