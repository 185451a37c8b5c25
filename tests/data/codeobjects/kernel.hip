// The smallest HIP translation unit with device code: one kernel, so each shared object built from it
// carries exactly one clang offload bundle (the audit's unit of judgement).
#include <hip/hip_runtime.h>

extern "C" __global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

// A host-side entry point so the library has a reason to carry the kernel's registration.
extern "C" hipError_t launch_scale(float *x, float a, int n) {
  scale<<<(n + 255) / 256, 256>>>(x, a, n);
  return hipGetLastError();
}
