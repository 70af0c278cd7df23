// A small CUDA program for checking `rt exec --gpu` on a host with an
// NVIDIA GPU: it names the device, adds two vectors on it and checks the sum
// on the CPU. Exit status 0 only when every element is right.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "vecadd: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

int main() {
  int driver = 0, runtime = 0, count = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) return fail("cudaGetDeviceCount", e);
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("devices: %d; device 0: %s, compute capability %d.%d, %d multiprocessors, %zu MiB\n", count, p.name,
              p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem >> 20);
  std::printf("CUDA driver API %d, runtime %d\n", driver, runtime);

  const int n = 1 << 24;
  const size_t bytes = n * sizeof(float);
  float* h = static_cast<float*>(std::malloc(3 * bytes));
  for (int i = 0; i < n; ++i) {
    h[i] = float(i);
    h[n + i] = float(2 * i);
  }
  float *a, *b, *c;
  if (cudaError_t e = cudaMalloc(&a, 3 * bytes); e != cudaSuccess) return fail("cudaMalloc", e);
  b = a + n;
  c = b + n;
  cudaMemcpy(a, h, 2 * bytes, cudaMemcpyHostToDevice);
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("kernel", e);
  cudaMemcpy(h + 2 * n, c, bytes, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < n; ++i)
    if (h[2 * n + i] != float(3 * i)) ++wrong;
  std::printf("vector add of %d floats on the GPU: %s (%d wrong)\n", n, wrong ? "WRONG" : "correct", wrong);
  cudaFree(a);
  std::free(h);
  return wrong ? 1 : 0;
}
