// The CUDA backend's pure host logic (device choice, shared-device detection, flags, interval
// overlap). Compiled in every build so that unit tests run without CUDA.
#include "strider/device/gpu_binding.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "strider/core/error.hpp"
#include "strider/device/cuda_backend.hpp"

namespace strider {

int choose_device(int local_rank, int device_count) {
  STRIDER_REQUIRE(device_count > 0, "no CUDA device to bind (device count " + std::to_string(device_count) + ")");
  STRIDER_REQUIRE(local_rank >= 0, "negative node-local rank " + std::to_string(local_rank));
  return local_rank % device_count;
}

DeviceIdentity make_device_identity(const std::string& host, const unsigned char* uuid16, int device) {
  DeviceIdentity identity;
  const std::size_t length = std::min(host.size(), sizeof(identity.host) - 1);
  std::memcpy(identity.host, host.data(), length);
  std::memcpy(identity.uuid, uuid16, sizeof(identity.uuid));
  identity.device = device;
  return identity;
}

std::string device_uuid_text(const unsigned char* uuid16) {
  static const char digits[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += digits[uuid16[i] >> 4];
    text += digits[uuid16[i] & 0xf];
  }
  return text;
}

std::vector<std::vector<int>> ranks_sharing_devices(const std::vector<DeviceIdentity>& identities) {
  // Key: (host, uuid). std::map keeps the first rank's order stable; groups are sorted afterwards.
  std::map<std::pair<std::string, std::string>, std::vector<int>> by_device;
  for (std::size_t rank = 0; rank < identities.size(); ++rank) {
    const DeviceIdentity& identity = identities[rank];
    const std::string host(identity.host, strnlen(identity.host, sizeof(identity.host)));
    const std::string uuid(reinterpret_cast<const char*>(identity.uuid), sizeof(identity.uuid));
    by_device[{host, uuid}].push_back(static_cast<int>(rank));
  }
  std::vector<std::vector<int>> groups;
  for (auto& entry : by_device) {
    if (entry.second.size() > 1) groups.push_back(std::move(entry.second));
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return groups;
}

std::string describe_shared_devices(const std::vector<DeviceIdentity>& identities,
                                    const std::vector<std::vector<int>>& groups) {
  std::string text;
  for (const auto& group : groups) {
    std::string ranks;
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i > 0) ranks += i + 1 == group.size() ? " and " : ", ";
      ranks += std::to_string(group[i]);
    }
    const DeviceIdentity& first = identities[static_cast<std::size_t>(group.front())];
    const std::string host(first.host, strnlen(first.host, sizeof(first.host)));
    if (!text.empty()) text += "; ";
    text += "ranks " + ranks + " on host " + host + " share " + device_uuid_text(first.uuid) + " (device " +
            std::to_string(first.device) + " of rank " + std::to_string(group.front()) + ")";
  }
  return text;
}

std::string describe_device_binding(const std::vector<DeviceIdentity>& identities, std::size_t max_hosts) {
  std::vector<std::string> hosts;                                     // in the order of their first rank
  std::map<std::string, std::pair<std::string, std::string>> listed;  // host -> (ranks, devices)
  for (std::size_t rank = 0; rank < identities.size(); ++rank) {
    const DeviceIdentity& identity = identities[rank];
    const std::string host(identity.host, strnlen(identity.host, sizeof(identity.host)));
    auto [entry, added] = listed.try_emplace(host);
    if (added) hosts.push_back(host);
    auto& [ranks, devices] = entry->second;
    ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
    devices += (devices.empty() ? "" : ",") + std::to_string(identity.device);
  }
  std::string text;
  for (std::size_t i = 0; i < hosts.size() && i < max_hosts; ++i) {
    const auto& [ranks, devices] = listed[hosts[i]];
    const bool one = ranks.find(',') == std::string::npos;
    text += (i > 0 ? "; " : "") + hosts[i] + (one ? ": rank " : ": ranks ") + ranks +
            (one ? " -> device " : " -> devices ") + devices;
  }
  if (hosts.size() > max_hosts) text += "; ... and " + std::to_string(hosts.size() - max_hosts) + " more hosts";
  return text;
}

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

void check_device_sharing(const std::vector<DeviceIdentity>& identities, bool allow_shared_device) {
  const auto groups = ranks_sharing_devices(identities);
  if (groups.empty() || allow_shared_device) return;
  STRIDER_THROW(UsageError, describe_shared_devices(identities, groups) +
                                ": one GPU per rank is expected (start as many ranks per node as GPUs, or give each "
                                "rank its own device with CUDA_VISIBLE_DEVICES / --gpus-per-task=1); set "
                                "STRIDER_ALLOW_SHARED_GPU=1 to share on purpose (gradients then go through MPI)");
}

namespace {
std::string lowercase(const char* value) {
  std::string text(value);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}
}  // namespace

bool parse_flag_bool(const std::string& name, const char* value, bool default_value) {
  if (value == nullptr || *value == '\0') return default_value;
  const std::string text = lowercase(value);
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  STRIDER_THROW(UsageError, name + "='" + value + "': use 1/true/yes/on or 0/false/no/off");
}

double parse_flag_seconds(const std::string& name, const char* value, double default_value) {
  if (value == nullptr || *value == '\0') return default_value;
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  STRIDER_REQUIRE(end != value && *end == '\0' && seconds >= 0.0 && seconds < 1e9,
                  name + "='" + value + "': expected a non-negative number of seconds");
  return seconds;
}

const char* cuda_dense_name(CudaDense dense) noexcept {
  return dense == CudaDense::kernels ? "kernels" : "cublas";
}

CudaBackendFlags parse_cuda_backend_flags(const char* allow_shared_gpu, const char* nccl_timeout_s,
                                          const char* nccl_one_rank, const char* dense) {
  CudaBackendFlags flags;
  if (dense != nullptr && *dense != '\0') {
    const std::string text = lowercase(dense);
    if (text == "kernels")
      flags.dense = CudaDense::kernels;
    else if (text != "cublas")
      STRIDER_THROW(UsageError, std::string("STRIDER_CUDA_DENSE='") + dense + "': use cublas or kernels");
  }
  flags.nccl_one_rank = parse_flag_bool("STRIDER_TEST_NCCL_ONE_RANK", nccl_one_rank, flags.nccl_one_rank);
  flags.allow_shared_device = parse_flag_bool("STRIDER_ALLOW_SHARED_GPU", allow_shared_gpu, flags.allow_shared_device);
  flags.nccl_timeout_s = parse_flag_seconds("STRIDER_NCCL_TIMEOUT_S", nccl_timeout_s, flags.nccl_timeout_s);
  return flags;
}

CudaBackendFlags cuda_backend_flags_from_environment() {
  return parse_cuda_backend_flags(std::getenv("STRIDER_ALLOW_SHARED_GPU"), std::getenv("STRIDER_NCCL_TIMEOUT_S"),
                                  std::getenv("STRIDER_TEST_NCCL_ONE_RANK"), std::getenv("STRIDER_CUDA_DENSE"));
}

double overlap_ms(const TimedInterval& a, const TimedInterval& b) noexcept {
  const double start = std::max(a.start_ms, b.start_ms);
  const double end = std::min(a.end_ms, b.end_ms);
  return end > start ? end - start : 0.0;
}

}  // namespace strider
