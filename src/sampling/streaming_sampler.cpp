#include "strider/sampling/streaming_sampler.hpp"

#include "strider/core/hash.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

namespace {

// derive_seed stream of the epoch's permutation.
constexpr std::uint64_t permutation_stream = 0x53545245414d0001ULL;  // "STREAM" 1

}  // namespace

StreamingSampler::StreamingSampler(const StreamingSamplerConfig& config, int world_size, int rank)
    : PartitionedSampler(config, world_size, rank), config_(config) {
  on_epoch();
}

void StreamingSampler::on_epoch() {
  if (config_.shuffle)
    permutation_ = FeistelPermutation(static_cast<std::uint64_t>(config_.dataset_size),
                                      derive_seed(seed(), epoch(), permutation_stream));
}

std::int64_t StreamingSampler::index_at(std::int64_t position) const {
  const std::int64_t order_position = partition().index_at(position);
  return config_.shuffle ? static_cast<std::int64_t>(permutation_(static_cast<std::uint64_t>(order_position)))
                         : order_position;
}

void StreamingSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  partition().batch(step, indices);  // positions of the order, with the distributed sampler's padding
  if (!config_.shuffle) return;
  permutation_.permute(indices.data(), indices.size());
}

std::uint64_t StreamingSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(partition().config_hash());  // dataset size, drop_last, drop_last_batch, seed
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  return hash.value();
}

}  // namespace strider
