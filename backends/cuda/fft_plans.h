// The cuFFT plan cache of one CudaBackend: a plan per transform geometry (type, sizes, strides,
// distances, batch), made once on first use and bound to the backend's stream. Plans do not
// own work areas (auto-allocation is off): each execution borrows one from the caching
// allocator, so many cached plans cost no idle device memory.
#pragma once
#include <cufft.h>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_check.h"

namespace mixlab {

struct FftPlan {
  cufftHandle handle = 0;
  size_t work_bytes = 0;
};

// rank 1 or 2; sizes, embeddings, strides and distances in elements of the respective type.
struct FftGeometry {
  cufftType type;
  int rank;
  long long n[2];
  long long inembed[2], istride, idist;
  long long onembed[2], ostride, odist;
  long long batch;

  std::array<long long, 13> key() const {
    return {static_cast<long long>(type),
            rank,
            n[0],
            n[1],
            inembed[0],
            inembed[1],
            istride,
            idist,
            onembed[0],
            onembed[1],
            ostride,
            odist,
            batch};
  }
};

struct FftPlanCache {
  std::mutex mutex;  // held while a plan is made or executed (work area binding)
  std::map<std::array<long long, 13>, FftPlan> plans;

  // Call with `mutex` held.
  FftPlan get(const FftGeometry& g, cudaStream_t stream) {
    auto key = g.key();
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    FftPlan plan;
    MIXLAB_CUFFT_CHECK(cufftCreate(&plan.handle));
    try {
      MIXLAB_CUFFT_CHECK(cufftSetAutoAllocation(plan.handle, 0));
      long long n[2] = {g.n[0], g.n[1]};
      long long inembed[2] = {g.inembed[0], g.inembed[1]};
      long long onembed[2] = {g.onembed[0], g.onembed[1]};
      MIXLAB_CUFFT_CHECK(cufftMakePlanMany64(plan.handle, g.rank, n, inembed, g.istride, g.idist,
                                             onembed, g.ostride, g.odist, g.type, g.batch,
                                             &plan.work_bytes));
      MIXLAB_CUFFT_CHECK(cufftSetStream(plan.handle, stream));
    } catch (...) {
      cufftDestroy(plan.handle);
      throw;
    }
    plans.emplace(key, plan);
    return plan;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [key, plan] : plans) cufftDestroy(plan.handle);
    plans.clear();
  }
};

}  // namespace mixlab
