#include "strider/sampling/block_sampler.hpp"

#include <algorithm>
#include <limits>

#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

namespace {

// derive_seed streams of the epoch's block order and window shuffles.
constexpr std::uint64_t block_stream = 0x424c4f434b000001ULL;   // "BLOCK" 1
constexpr std::uint64_t window_stream = 0x424c4f434b000002ULL;  // "BLOCK" 2

}  // namespace

BlockSampler::BlockSampler(const BlockSamplerConfig& config, int world_size, int rank)
    : PartitionedSampler(config, world_size, rank), config_(config) {
  if (config.block_size < 1)
    STRIDER_THROW(UsageError, "block: block_size must be >= 1, got " + std::to_string(config.block_size));
  if (config.block_window < 1)
    STRIDER_THROW(UsageError, "block: block_window must be >= 1, got " + std::to_string(config.block_window));
  full_blocks_ = config.dataset_size / config.block_size;
  const std::int64_t per_rank = partition().samples_per_rank();
  const std::int64_t window = config.block_window > std::numeric_limits<std::int64_t>::max() / config.block_size
                                  ? std::numeric_limits<std::int64_t>::max()
                                  : config.block_window * config.block_size;
  window_size_ = std::max<std::int64_t>(1, std::min(window, per_rank));
  on_epoch();
}

void BlockSampler::on_epoch() {
  if (!config_.shuffle) return;
  if (config_.shuffle_blocks)
    block_order_ =
        FeistelPermutation(static_cast<std::uint64_t>(full_blocks_), derive_seed(seed(), epoch(), block_stream));
  const std::int64_t per_rank = partition().samples_per_rank();
  const std::int64_t windows = per_rank / window_size_ + (per_rank % window_size_ != 0 ? 1 : 0);
  const std::uint64_t window_key = derive_seed(seed(), epoch(), window_stream);
  window_order_ = FeistelPermutation(static_cast<std::uint64_t>(window_size_), window_key);
  last_window_order_ = FeistelPermutation(
      static_cast<std::uint64_t>(per_rank - std::max<std::int64_t>(windows - 1, 0) * window_size_), window_key);
}

void BlockSampler::order_positions(std::int64_t first, std::int64_t count, std::int64_t* out) const {
  const std::int64_t per_rank = partition().samples_per_rank();
  const auto n = static_cast<std::uint64_t>(config_.dataset_size);
  const std::uint64_t range_start = static_cast<std::uint64_t>(rank()) * static_cast<std::uint64_t>(per_rank);
  const std::int64_t last_window = (per_rank - 1) / window_size_;
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t position = first + done;
    const std::int64_t window = position / window_size_, window_start = window * window_size_;
    const std::int64_t run = std::min(count - done, std::min(per_rank, window_start + window_size_) - position);
    std::int64_t* part = out + done;
    for (std::int64_t k = 0; k < run; ++k) part[k] = position + k - window_start;
    if (config_.shuffle) {
      // One permutation per (rank, window): the tweak is unique for each.
      const std::uint64_t tweak = static_cast<std::uint64_t>(window) * static_cast<std::uint64_t>(world_size()) +
                                  static_cast<std::uint64_t>(rank()) + 1;
      (window == last_window ? last_window_order_ : window_order_).permute(part, static_cast<std::size_t>(run), tweak);
    }
    for (std::int64_t k = 0; k < run; ++k) {
      std::uint64_t global = range_start + static_cast<std::uint64_t>(window_start + part[k]);
      if (global >= n) global %= n;  // padding wraps to the order's start
      part[k] = static_cast<std::int64_t>(global);
    }
    done += run;
  }
}

void BlockSampler::samples_at(std::int64_t* positions, std::size_t count) const {
  if (!config_.shuffle || !config_.shuffle_blocks || full_blocks_ <= 1) return;  // the blocks in storage order
  const std::int64_t block_size = config_.block_size, shuffled_end = full_blocks_ * block_size;
  std::vector<std::int64_t> offsets(count);  // in-block offset, or ~position for the tail block
  for (std::size_t k = 0; k < count; ++k) {
    const std::int64_t position = positions[k];
    if (position < shuffled_end) {
      offsets[k] = position % block_size;
      positions[k] = position / block_size;
    } else {
      offsets[k] = ~position;
      positions[k] = 0;  // a valid block for permute(); replaced below
    }
  }
  block_order_.permute(positions, count);
  for (std::size_t k = 0; k < count; ++k)
    positions[k] = offsets[k] >= 0 ? positions[k] * block_size + offsets[k] : ~offsets[k];
}

std::int64_t BlockSampler::index_at(std::int64_t position) const {
  std::int64_t value = 0;
  order_positions(position, 1, &value);
  samples_at(&value, 1);
  return value;
}

void BlockSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  const std::int64_t batch_size = partition().batch_size(), first = step * batch_size;
  indices.resize(static_cast<std::size_t>(std::min(batch_size, partition().samples_per_rank() - first)));
  order_positions(first, static_cast<std::int64_t>(indices.size()), indices.data());
  samples_at(indices.data(), indices.size());
}

std::uint64_t BlockSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(partition().config_hash());  // dataset size, drop_last, drop_last_batch, seed
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(config_.block_size);
  hash.add(config_.block_window);
  if (!config_.shuffle_blocks) hash.add(std::uint8_t{0x4c});  // "L": local; absent otherwise, so hashes stay
  hash.add(world_size());  // the plan depends on R, not only on R*B: no elastic resume
  return hash.value();
}

}  // namespace strider
