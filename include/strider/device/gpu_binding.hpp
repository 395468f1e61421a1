#pragma once
/// \file
/// Which GPU a rank drives, and whether ranks of one node would share a physical device: the pure
/// host logic of the CUDA backend's binding (no CUDA header; compiled and unit-tested in every build).
///
/// Binding rule: device = node-local rank % visible devices. With one device per rank
/// (`CUDA_VISIBLE_DEVICES` per rank, Slurm's `--gpus-per-task=1`) every rank sees device 0 of its
/// own set, which is also right. Two ranks of one node whose devices have the same UUID would share
/// one physical GPU: an error unless allowed (STRIDER_ALLOW_SHARED_GPU=1), since it halves each
/// rank's speed and NCCL refuses two ranks on one device.

#include <cstdint>
#include <string>
#include <vector>

#include "strider/config.hpp"

namespace strider {

/// The device ordinal a rank binds: local_rank % device_count. Throws UsageError when device_count
/// is not positive or local_rank is negative. Not collective.
int choose_device(int local_rank, int device_count);

/// What a rank reports about its device so the ranks of a node can compare (trivially copyable, for
/// Communicator::all_gather).
struct DeviceIdentity {
  char host[64] = {};           ///< host name (truncated, zero-terminated)
  unsigned char uuid[16] = {};  ///< the device's UUID (cudaDeviceProp::uuid)
  std::int32_t device = -1;     ///< the ordinal this rank bound (relative to its visible devices)
};

/// A DeviceIdentity from its parts (host truncated to 63 characters). Not collective.
DeviceIdentity make_device_identity(const std::string& host, const unsigned char* uuid16, int device);

/// The UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string device_uuid_text(const unsigned char* uuid16);

/// Groups of ranks (index into `identities` = rank) that share one physical device on one host:
/// only groups of two or more ranks, each group in rank order, groups ordered by their first rank.
std::vector<std::vector<int>> ranks_sharing_devices(const std::vector<DeviceIdentity>& identities);

/// One sentence per group: "ranks 0 and 1 on host n01 share GPU-... (device 0)". Empty when none.
std::string describe_shared_devices(const std::vector<DeviceIdentity>& identities,
                                    const std::vector<std::vector<int>>& groups);

/// The device each rank binds, host by host in the order of their first rank: "n01: ranks 0,1 ->
/// devices 0,1; n02: ranks 2,3 -> devices 0,1". At most `max_hosts` hosts are named, then
/// "; ... and K more hosts". Not collective.
std::string describe_device_binding(const std::vector<DeviceIdentity>& identities, std::size_t max_hosts = 8);

/// The host name of this process (gethostname; its UTS namespace's), "unknown-host" when it fails.
std::string this_host_name();

/// Throws UsageError naming the ranks, host and UUID when ranks share a device and
/// allow_shared_device is false. Every rank that holds the same identities decides the same, so
/// calling it after an all_gather is collective-safe. Not collective itself.
void check_device_sharing(const std::vector<DeviceIdentity>& identities, bool allow_shared_device);

/// How the CUDA models compute their dense (affine) layers: cuBLAS's SGEMM (fp32), or strider's own
/// per-output kernels (the ones the CPU models were first checked against; no cuBLAS call).
enum class CudaDense { cublas, kernels };

/// "cublas" or "kernels".
const char* cuda_dense_name(CudaDense dense) noexcept;

/// Options of the CUDA backend that come from the environment (the Backend factory has no options).
struct CudaBackendFlags {
  bool allow_shared_device = false;  ///< STRIDER_ALLOW_SHARED_GPU: ranks of a node may share one GPU
  double nccl_timeout_s = 600.0;     ///< STRIDER_NCCL_TIMEOUT_S: abort NCCL after this long (0: never)
  /// STRIDER_TEST_NCCL_ONE_RANK (a test setting): a job of one rank all-reduces through a NCCL
  /// communicator of one rank instead of scaling locally, so that NCCL's init, all-reduce and abort
  /// run on a machine with one GPU.
  bool nccl_one_rank = false;
  CudaDense dense = CudaDense::cublas;  ///< STRIDER_CUDA_DENSE: cublas | kernels
};

/// Parses a boolean flag's value: 1/true/yes/on and 0/false/no/off (any case), unset or empty gives
/// default_value. Throws UsageError naming `name` otherwise.
bool parse_flag_bool(const std::string& name, const char* value, bool default_value);

/// Parses a non-negative number of seconds; unset or empty gives default_value. Throws UsageError
/// naming `name` otherwise.
double parse_flag_seconds(const std::string& name, const char* value, double default_value);

/// The flags from the variables' values (nullptr: unset). Throws UsageError on a bad value.
CudaBackendFlags parse_cuda_backend_flags(const char* allow_shared_gpu, const char* nccl_timeout_s,
                                          const char* nccl_one_rank = nullptr, const char* dense = nullptr);

/// parse_cuda_backend_flags of getenv("STRIDER_ALLOW_SHARED_GPU"), getenv("STRIDER_NCCL_TIMEOUT_S"),
/// getenv("STRIDER_TEST_NCCL_ONE_RANK") and getenv("STRIDER_CUDA_DENSE").
CudaBackendFlags cuda_backend_flags_from_environment();

}  // namespace strider
