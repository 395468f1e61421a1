#include "strider/sampling/bucketed_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "sampling/key_sort.hpp"
#include "sampling/seeded_shuffle.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

namespace {

// derive_seed streams of the epoch's two shuffles.
constexpr std::uint64_t sample_stream = 0x4255434b45540001ULL;  // "BUCKET" 1
constexpr std::uint64_t batch_stream = 0x4255434b45540002ULL;   // "BUCKET" 2

}  // namespace

BucketedSampler::BucketedSampler(const BucketedSamplerConfig& config, int world_size, int rank)
    : Sampler(world_size, rank, config.seed), config_(config) {
  if (!config.lengths) STRIDER_THROW(UsageError, "the bucketed sampler needs per-sample lengths");
  if (config.max_tokens <= 0)
    STRIDER_THROW(UsageError, "bucketed: max_tokens must be > 0, got " + std::to_string(config.max_tokens));
  if (config.max_batch_size < 0)
    STRIDER_THROW(UsageError, "bucketed: max_batch_size must be >= 0, got " + std::to_string(config.max_batch_size));
  if (config.batch_size_multiple < 1)
    STRIDER_THROW(UsageError,
                  "bucketed: batch_size_multiple must be >= 1, got " + std::to_string(config.batch_size_multiple));
  if (config.max_batch_size > 0 && config.max_batch_size < config.batch_size_multiple)
    STRIDER_THROW(UsageError, "bucketed: max_batch_size " + std::to_string(config.max_batch_size) +
                                  " is below batch_size_multiple " + std::to_string(config.batch_size_multiple));
  if (config.megabatch < 0)
    STRIDER_THROW(UsageError, "bucketed: megabatch must be >= 0, got " + std::to_string(config.megabatch));
  if (config.step_group < 1)
    STRIDER_THROW(UsageError, "bucketed: step_group must be >= 1, got " + std::to_string(config.step_group));

  const SharedView<std::int64_t>& lengths = config.lengths;
  Fnv1a64 hash;
  std::size_t longest = 0;
  for (std::size_t sample = 0; sample < lengths.size(); ++sample) {
    const std::int64_t length = lengths[sample];
    if (length < 1 || length > config.max_tokens)
      STRIDER_THROW(UsageError, "bucketed: sample " + std::to_string(sample) + " has length " + std::to_string(length) +
                                    (length < 1 ? ", lengths must be >= 1"
                                                : ", longer than max_tokens " + std::to_string(config.max_tokens)));
    if (length > lengths[longest]) longest = sample;
    hash.add(length);
  }
  lengths_hash_ = hash.value();
  if (!lengths.empty() && config.batch_size_multiple > config.max_tokens / lengths[longest])
    STRIDER_THROW(UsageError, "bucketed: batch_size_multiple " + std::to_string(config.batch_size_multiple) +
                                  " samples as long as sample " + std::to_string(longest) + " (" +
                                  std::to_string(lengths[longest]) + " tokens) exceed max_tokens " +
                                  std::to_string(config.max_tokens));
  on_epoch();
}

void BucketedSampler::pack_window(std::vector<std::uint64_t>& window, bool last_window) {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  // Entries: (length << index_bits_ | index) where packed, else the index (see make_plan).
  const bool packed = index_bits_ > 0;
  const std::uint64_t index_mask = packed ? (std::uint64_t{1} << index_bits_) - 1 : ~std::uint64_t{0};
  auto length_of = [&](std::uint64_t entry) {
    return packed ? static_cast<std::int64_t>(entry >> index_bits_) : lengths[static_cast<std::size_t>(entry)];
  };
  // Ascending (length, index): a total order, so any sort gives the same window. Packed entries
  // are sorted as integers, without looking a length up per comparison (the window sort is among
  // the plan's largest costs): through a bitmap of their indices where those are dense, else by
  // radix.
  if (packed) {
    if (!sampling_detail::sort_dense_keys(window, index_bits_, lengths.data(), spare_keys_, window_bitmap_,
                                          length_starts_))
      sampling_detail::sort_keys(window, spare_keys_);
  } else {
    std::sort(window.begin(), window.end(), [&](std::uint64_t a, std::uint64_t b) {
      return length_of(a) != length_of(b) ? length_of(a) < length_of(b) : a < b;
    });
  }
  const auto size = static_cast<std::int64_t>(window.size());
  const std::int64_t multiple = config_.batch_size_multiple;
  const std::int64_t count_limit =
      config_.max_batch_size > 0 ? config_.max_batch_size : std::numeric_limits<std::int64_t>::max();
  // max_tokens / length, divided once per run of equal lengths rather than once per sample.
  std::int64_t divided_length = 0, most_of_length = 0;
  const auto most_of = [&](std::int64_t length) {
    if (length != divided_length) {
      divided_length = length;
      most_of_length = config_.max_tokens / length;
    }
    return most_of_length;
  };
  std::int64_t start = 0;
  while (start < size) {
    // Ascending lengths: the sample being added is the batch's longest.
    std::int64_t count = 0;
    while (start + count < size && count < count_limit &&
           count + 1 <= most_of(length_of(window[static_cast<std::size_t>(start + count)])))
      ++count;                                            // >= 1: no sample is longer than max_tokens
    if (start + count == size && !last_window) break;     // partial: carried into the next window
    if (start + count < size) count -= count % multiple;  // >= multiple: validated against the longest sample
    std::int64_t tokens = 0;
    for (std::int64_t k = start; k < start + count; ++k) {
      const std::uint64_t entry = window[static_cast<std::size_t>(k)];
      samples_.push_back(static_cast<std::int64_t>(entry & index_mask));
      tokens += length_of(entry);
    }
    sequence_.push_back(Span{static_cast<std::int64_t>(samples_.size()) - count, count,
                             length_of(window[static_cast<std::size_t>(start + count - 1)])});
    largest_batch_ = std::max(largest_batch_, count);
    largest_batch_tokens_ = std::max(largest_batch_tokens_, tokens);
    start += count;
  }
  window.erase(window.begin(), window.begin() + start);
}

void BucketedSampler::on_epoch() {
  if (!config_.shared_plan) {
    make_plan();
    return;
  }
  // One plan per epoch and configuration (the seed included); the node's ranks make them in turn.
  Fnv1a64 key;
  key.add(config_hash());
  key.add(epoch());
  config_.shared_plan->share(
      key.value() | 1, static_cast<std::uint64_t>(seed()) + static_cast<std::uint64_t>(epoch()),
      [this] { make_plan(); }, [this] { return plan_pieces(); },
      [this](const std::byte* data, std::int64_t bytes) { return load_plan(data, bytes); });
}

// A shared plan: the batch count, the largest batch and the most tokens of a batch, the samples
// (N), then the batches' spans.
std::int64_t BucketedSampler::shared_plan_bytes(std::int64_t samples, std::int64_t batches) noexcept {
  static_assert(sizeof(Span) == 3 * sizeof(std::int64_t) && std::is_trivially_copyable_v<Span>,
                "a plan's spans are shared as bytes");
  return static_cast<std::int64_t>(sizeof(plan_header_) + sizeof(std::int64_t) * static_cast<std::size_t>(samples) +
                                   sizeof(Span) * static_cast<std::size_t>(batches));
}

std::vector<SharedPlan::Piece> BucketedSampler::plan_pieces() {
  plan_header_[0] = num_batches();
  plan_header_[1] = largest_batch_;
  plan_header_[2] = largest_batch_tokens_;
  return {{plan_header_, static_cast<std::int64_t>(sizeof(plan_header_))},
          {samples_.data(), static_cast<std::int64_t>(samples_.size() * sizeof(std::int64_t))},
          {sequence_.data(), static_cast<std::int64_t>(sequence_.size() * sizeof(Span))}};
}

bool BucketedSampler::load_plan(const std::byte* data, std::int64_t bytes) {
  // The bytes may be overwritten while they are read (the caller then throws the result away): every
  // size is checked against `bytes` before it is used.
  const auto n = static_cast<std::int64_t>(config_.lengths.size());
  std::int64_t header[sizeof(plan_header_) / sizeof(std::int64_t)];
  if (bytes < shared_plan_bytes(n, 0)) return false;
  std::memcpy(header, data, sizeof(header));
  const std::int64_t batches = header[0];
  if (batches < 0 || batches > n || bytes != shared_plan_bytes(n, batches)) return false;
  samples_.resize(static_cast<std::size_t>(n));
  sequence_.resize(static_cast<std::size_t>(batches));
  std::memcpy(samples_.data(), data + sizeof(header), samples_.size() * sizeof(std::int64_t));
  std::memcpy(static_cast<void*>(sequence_.data()), data + sizeof(header) + samples_.size() * sizeof(std::int64_t),
              sequence_.size() * sizeof(Span));
  largest_batch_ = header[1];
  largest_batch_tokens_ = header[2];
  // A plan every later step can rely on: spans of at least one sample inside the N, covering N in
  // all, the largest as said, the most tokens of a batch within the costliest batch's padded
  // tokens (and so within max_tokens), every sample index a sample's.
  std::int64_t covered = 0, largest = 0, costliest = 0;
  for (const Span& span : sequence_) {
    if (span.count < 1 || span.first < 0 || span.first > n - span.count || span.longest < 1 ||
        span.longest > config_.max_tokens / span.count)
      return false;
    covered += span.count;
    largest = std::max(largest, span.count);
    costliest = std::max(costliest, span.cost());
  }
  if (covered != n || largest != largest_batch_ || largest_batch_tokens_ < 0 || largest_batch_tokens_ > costliest)
    return false;
  for (std::int64_t sample : samples_)
    if (sample < 0 || sample >= n) return false;
  return true;
}

void BucketedSampler::make_plan() {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  const auto n = static_cast<std::int64_t>(lengths.size());
  samples_.clear();
  samples_.reserve(static_cast<std::size_t>(n));
  sequence_.clear();
  largest_batch_ = 0;
  largest_batch_tokens_ = 0;

  // Windows of about `megabatch` batches' worth of tokens (saturating: 0 or huge means the epoch).
  const std::int64_t window_tokens =
      config_.megabatch == 0 || config_.megabatch > std::numeric_limits<std::int64_t>::max() / config_.max_tokens
          ? std::numeric_limits<std::int64_t>::max()
          : config_.megabatch * config_.max_tokens;
  // Each sample enters its window as one word, (length << index_bits_ | index), where a length and
  // an index fit one together (bits of max_tokens + bits of N - 1 <= 64), so that its length is
  // looked up once; else as its index (index_bits_ 0).
  const int index_bits = sampling_detail::bit_width(lengths.size() > 1 ? lengths.size() - 1 : 1);
  index_bits_ =
      index_bits + sampling_detail::bit_width(static_cast<std::uint64_t>(config_.max_tokens)) <= 64 ? index_bits : 0;
  const bool packed = index_bits_ > 0;
  // The epoch's order of samples, shuffled as words: Fisher-Yates moves them as it would move the
  // bare indices, and each length is then read in index order, not at a random place per sample.
  std::vector<std::uint64_t> entries(static_cast<std::size_t>(n));
  for (std::int64_t sample = 0; sample < n; ++sample)
    entries[static_cast<std::size_t>(sample)] =
        packed ? static_cast<std::uint64_t>(lengths[static_cast<std::size_t>(sample)]) << index_bits_ |
                     static_cast<std::uint64_t>(sample)
               : static_cast<std::uint64_t>(sample);
  if (config_.shuffle)
    sampling_detail::shuffle_seeded(entries.data(), entries.size(), derive_seed(seed(), epoch(), sample_stream));

  std::vector<std::uint64_t>& window = keys_;
  window.clear();
  std::int64_t window_sum = 0;  // tokens of the window's new samples (the carry is < one batch)
  for (std::int64_t position = 0; position < n; ++position) {
    const std::uint64_t entry = entries[static_cast<std::size_t>(position)];
    window.push_back(entry);
    window_sum += packed ? static_cast<std::int64_t>(entry >> index_bits_) : lengths[static_cast<std::size_t>(entry)];
    if (window_sum >= window_tokens || position + 1 == n) {
      pack_window(window, position + 1 == n);
      window_sum = 0;
    }
  }
  std::vector<std::uint64_t>().swap(entries);

  if (config_.shuffle) {
    std::mt19937_64 engine(derive_seed(seed(), epoch(), batch_stream));
    for (std::size_t i = sequence_.size(); i > 1; --i)  // Fisher-Yates, as shuffle_in_place
      std::swap(sequence_[i - 1], sequence_[static_cast<std::size_t>(uniform_below(engine, i))]);
  }
  // Costliest first (ties: the longer samples, then the earlier formed), a total order on batches.
  auto costlier = [](const Span& a, const Span& b) {
    if (a.cost() != b.cost()) return a.cost() > b.cost();
    if (a.longest != b.longest) return a.longest > b.longest;
    return a.first < b.first;
  };
  if (config_.most_expensive_first && !sequence_.empty())
    std::swap(sequence_[0], *std::min_element(sequence_.begin(), sequence_.end(), costlier));
  // Snake order over groups: descending, ascending, ... so that group borders join similar costs;
  // group 0 descending keeps the costliest batch first.
  const auto group = static_cast<std::size_t>(std::min<std::int64_t>(config_.step_group, n + 1));
  for (std::size_t begin = 0, index = 0; begin < sequence_.size(); begin += group, ++index) {
    const auto end = sequence_.begin() + static_cast<std::ptrdiff_t>(std::min(sequence_.size(), begin + group));
    if (index % 2 == 0)
      std::sort(sequence_.begin() + static_cast<std::ptrdiff_t>(begin), end, costlier);
    else
      std::sort(sequence_.begin() + static_cast<std::ptrdiff_t>(begin), end,
                [&](const Span& a, const Span& b) { return costlier(b, a); });
  }
}

std::int64_t BucketedSampler::num_steps() const {
  const std::int64_t batches = num_batches(), world = world_size();
  return batches / world + (batches % world != 0 ? 1 : 0);
}

void BucketedSampler::sequence_batch(std::int64_t position, std::vector<std::int64_t>& indices) const {
  if (position < 0 || position >= num_batches())
    STRIDER_THROW(UsageError, "batch " + std::to_string(position) + " is outside the epoch's " +
                                  std::to_string(num_batches()) + " batches");
  const Span& span = sequence_[static_cast<std::size_t>(position)];
  indices.assign(samples_.begin() + span.first, samples_.begin() + span.first + span.count);
}

std::int64_t BucketedSampler::sequence_cost(std::int64_t position) const {
  if (position < 0 || position >= num_batches())
    STRIDER_THROW(UsageError, "batch " + std::to_string(position) + " is outside the epoch's " +
                                  std::to_string(num_batches()) + " batches");
  return sequence_[static_cast<std::size_t>(position)].cost();
}

void BucketedSampler::batch(std::int64_t step, std::vector<std::int64_t>& indices) const {
  check_step(step);
  // Padding: positions past the end repeat the sequence from its start.
  sequence_batch((step * world_size() + rank()) % num_batches(), indices);
}

std::int64_t BucketedSampler::consumed_after(std::int64_t steps) const {
  return std::clamp<std::int64_t>(steps, 0, num_steps()) * world_size();
}

std::int64_t BucketedSampler::step_for_consumed(std::int64_t consumed) const {
  if (consumed < 0 || consumed % world_size() != 0 || consumed / world_size() > num_steps())
    STRIDER_THROW(UsageError, "no step boundary after " + std::to_string(consumed) + " global batches at " +
                                  std::to_string(world_size()) + " ranks and " + std::to_string(num_steps()) +
                                  " steps");
  return consumed / world_size();
}

std::uint64_t BucketedSampler::config_hash() const {
  Fnv1a64 hash;
  hash.add(mode());
  hash.add(static_cast<std::int64_t>(config_.lengths.size()));
  hash.add(lengths_hash_);
  for (std::int64_t value :
       {config_.max_tokens, config_.max_batch_size, config_.batch_size_multiple, config_.megabatch, config_.step_group})
    hash.add(value);
  hash.add(static_cast<std::uint8_t>(config_.most_expensive_first));
  hash.add(static_cast<std::uint8_t>(config_.shuffle));
  hash.add(config_.seed);
  return hash.value();
}

}  // namespace strider
