#include "sampling/class_plan.hpp"

#include <algorithm>

#include "sampling/seeded_shuffle.hpp"
#include "strider/core/error.hpp"
#include "strider/sampling/random.hpp"

namespace strider::detail {

namespace {
constexpr std::uint64_t batch_order_stream = 0xba7c400000000000ULL;
}  // namespace

void ClassCycler::build(const ClassIndex& index, bool shuffle, std::int64_t seed, std::int64_t epoch,
                        std::uint64_t stream) {
  shuffle_ = shuffle;
  pass_key_ = derive_seed(seed, epoch, stream - 1);
  lists_.resize(static_cast<std::size_t>(index.num_classes()));
  for (int label = 0; label < index.num_classes(); ++label) {
    auto& list = lists_[static_cast<std::size_t>(label)];
    list.assign(index.members(label), index.members(label) + index.count(label));
    if (!shuffle || list.size() < 2) continue;
    sampling_detail::shuffle_seeded(list.data(), list.size(),
                                    derive_seed(seed, epoch, stream + static_cast<std::uint64_t>(label)));
  }
}

std::int64_t ClassCycler::sample(int label, std::int64_t occurrence) const {
  const auto& list = lists_[static_cast<std::size_t>(label)];
  const auto count = static_cast<std::uint64_t>(list.size());
  const auto position = static_cast<std::uint64_t>(occurrence);
  const std::uint64_t pass = position / count;
  std::uint64_t offset = 0;
  if (pass > 0 && shuffle_) offset = CounterStream(pass_key_ ^ static_cast<std::uint64_t>(label), pass).below(count);
  return list[static_cast<std::size_t>((position % count + offset) % count)];
}

void deal_run(const ClassCycler& cycler, int label, std::int64_t first, std::int64_t count, std::uint64_t arc_start,
              int world_size, int rank, std::vector<std::int64_t>& out) {
  const auto world = static_cast<std::uint64_t>(world_size);
  // The first t with (arc_start + t) mod R == rank.
  const std::uint64_t first_t = (static_cast<std::uint64_t>(rank) + world - arc_start % world) % world;
  for (auto t = static_cast<std::int64_t>(first_t); t < count; t += world_size)
    out.push_back(cycler.sample(label, first + t));
}

void shuffle_batch(std::vector<std::int64_t>& batch, std::int64_t seed, std::int64_t epoch, std::int64_t step,
                   int rank) {
  // shuffle_in_place with std::mt19937_64 of this seed, its stream drawn a block at a time.
  sampling_detail::shuffle_seeded(
      batch.data(), batch.size(),
      derive_seed(seed, epoch,
                  batch_order_stream ^ mix64(static_cast<std::uint64_t>(step)) ^ static_cast<std::uint64_t>(rank)));
}

std::int64_t fixed_batch_steps(std::int64_t total, std::int64_t global_batch, bool drop_last) {
  if (global_batch <= 0) return 0;
  return drop_last ? total / global_batch : total / global_batch + (total % global_batch != 0 ? 1 : 0);
}

std::int64_t fixed_batch_consumed(std::int64_t steps, std::int64_t num_steps, std::int64_t global_batch) {
  return std::clamp<std::int64_t>(steps, 0, num_steps) * global_batch;
}

std::int64_t fixed_batch_step_for(std::int64_t consumed, std::int64_t num_steps, std::int64_t global_batch) {
  if (consumed == 0) return 0;
  if (consumed < 0 || global_batch <= 0 || consumed % global_batch != 0 || consumed / global_batch > num_steps)
    STRIDER_THROW(UsageError, "no step boundary at global sample " + std::to_string(consumed) +
                                  " for a global batch of " + std::to_string(global_batch) + " and " +
                                  std::to_string(num_steps) + " steps");
  return consumed / global_batch;
}

std::vector<int> classes_with_samples(const ClassIndex& index) {
  std::vector<int> present;
  for (int label = 0; label < index.num_classes(); ++label)
    if (index.count(label) > 0) present.push_back(label);
  return present;
}

}  // namespace strider::detail
