#pragma once
/// \file
/// The CUDA training backend (code in src/device/cuda/): one GPU per rank, a copy stream and a
/// compute stream, batches copied from pinned host memory into two device slots (stage() starts the
/// next batch's copy while the current step runs), fp32 kernels for the softmax, mlp and bag models
/// (the same math and parameter layout as the CPU backend), gradients all-reduced with NCCL.
/// No CUDA header here: the statistics below exist in every build, the factory only with CUDA.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strider/config.hpp"
#include "strider/device/backend.hpp"

namespace strider {

/// A span of device time in milliseconds since the backend's origin event (CUDA events), tagged
/// with the serial number of the batch it belongs to (the n-th batch the backend copied).
struct TimedInterval {
  double start_ms = 0.0;
  double end_ms = 0.0;
  std::int64_t batch = -1;
};

/// Milliseconds during which both intervals ran (0 when they do not meet).
double overlap_ms(const TimedInterval& a, const TimedInterval& b) noexcept;

/// What the CUDA backend measured since initialize() (or the last reset).
struct CudaBackendStats {
  int device = -1;                               ///< the bound device ordinal
  std::string device_name;                       ///< cudaDeviceProp::name
  std::string device_uuid;                       ///< "GPU-..."
  std::string all_reduce;                        ///< "nccl", "mpi-host" (shared device) or "" before the first
  std::int64_t steps = 0;                        ///< forward_backward calls
  std::int64_t staged_hits = 0;                  ///< forward_backward/predict calls that found their batch staged
  std::int64_t h2d_bytes = 0;                    ///< bytes copied host to device for batches
  double h2d_ms = 0.0;                           ///< copy-stream time of those copies (events)
  double kernel_ms = 0.0;                        ///< compute-stream time of steps and SGD updates (events)
  double all_reduce_ms = 0.0;                    ///< compute-stream time of gradient all-reduces (events)
  std::vector<TimedInterval> copy_intervals;     ///< the last batches' copies (at most 256)
  std::vector<TimedInterval> compute_intervals;  ///< the last steps' compute (at most 256)
};

#if STRIDER_HAS_CUDA
/// The CUDA backend on this rank's device: binds choose_device(comm.local_rank(), device count).
/// Not collective. The first all_reduce_gradients (collective over its comm) compares the device
/// UUIDs of the ranks of each node (UsageError on a shared device unless allow_shared_device) and
/// builds the NCCL communicator from an ncclUniqueId broadcast over MPI; ranks that share a device
/// (allowed) all-reduce through host memory with MPI instead, since NCCL refuses two ranks on one
/// device. Throws UsageError when no device works.
std::unique_ptr<Backend> make_cuda_backend(const Communicator& comm, bool allow_shared_device);

/// The statistics of a backend made by make_cuda_backend (UsageError for any other backend).
CudaBackendStats cuda_backend_stats(const Backend& backend);

/// Zeroes the counters and drops the intervals (e.g. after a warm-up). UsageError as above.
void reset_cuda_backend_stats(Backend& backend);
#endif

}  // namespace strider
