#include "strider/sampling/bucketed_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
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

template <typename F>
void BucketedSampler::with_samples(F&& f) {
  if (wide_)
    f(wide_samples_);
  else
    f(samples_);
}

template <typename F>
void BucketedSampler::with_samples(F&& f) const {
  if (wide_)
    f(wide_samples_);
  else
    f(samples_);
}

struct BucketedSampler::Ahead {
  std::mutex mutex;
  std::uint64_t key = 0;  // the plan's (plan_key); 0: none
  sampling_detail::WindowMarks marks;
  std::int64_t used = 0;  // plans that began with marks from here
};

BucketedSampler::BucketedSampler(const BucketedSamplerConfig& config, int world_size, int rank)
    : Sampler(world_size, rank, config.seed), config_(config), ahead_(std::make_shared<Ahead>()) {
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
  std::size_t shortest = 0, longest = 0;
  for (std::size_t sample = 0; sample < lengths.size(); ++sample) {
    const std::int64_t length = lengths[sample];
    if (length < 1 || length > config.max_tokens)
      STRIDER_THROW(UsageError, "bucketed: sample " + std::to_string(sample) + " has length " + std::to_string(length) +
                                    (length < 1 ? ", lengths must be >= 1"
                                                : ", longer than max_tokens " + std::to_string(config.max_tokens)));
    if (length < lengths[shortest]) shortest = sample;
    if (length > lengths[longest]) longest = sample;
    total_tokens_ += static_cast<std::uint64_t>(length);
    hash.add(length);
  }
  lengths_hash_ = hash.value();
  wide_ = sampling_detail::wide_plan_indices(lengths.size());
  if (!lengths.empty()) {
    shortest_length_ = lengths[shortest];
    longest_length_ = lengths[longest];
  }
  // Each sample enters its window as one word, (length << index_bits_ | index), where a length and
  // an index fit one together (bits of max_tokens + bits of N - 1 <= 64), so that its length is
  // looked up once; else as its index (index_bits_ 0).
  const int index_bits = sampling_detail::bit_width(lengths.size() > 1 ? lengths.size() - 1 : 1);
  index_bits_ =
      index_bits + sampling_detail::bit_width(static_cast<std::uint64_t>(config.max_tokens)) <= 64 ? index_bits : 0;
  // A marked order is shuffled as 32-bit words, ((length - shortest) << index_bits_ | index), where
  // they hold both (w3's plan of 200,000 samples: 1.31 ms, 1.37 in words of 64).
  narrow_order_ =
      index_bits_ > 0 && index_bits_ < 32 && markable() &&
      index_bits_ + sampling_detail::bit_width(static_cast<std::uint64_t>(longest_length_ - shortest_length_)) <= 32;
  // A narrow order is markable: at most 65,536 lengths, so each bucket fits 2 bytes.
  constexpr std::size_t kMostBucketSamples = std::size_t{1} << 24;  // 32 MiB of buckets
  if (narrow_order_ && lengths.size() <= kMostBucketSamples) {
    auto buckets = std::make_shared<std::vector<std::uint16_t>>(lengths.size());
    for (std::size_t sample = 0; sample < lengths.size(); ++sample)
      (*buckets)[sample] = static_cast<std::uint16_t>(lengths[sample] - shortest_length_);
    buckets_ = std::move(buckets);
  }
  if (!lengths.empty() && config.batch_size_multiple > config.max_tokens / lengths[longest])
    STRIDER_THROW(UsageError, "bucketed: batch_size_multiple " + std::to_string(config.batch_size_multiple) +
                                  " samples as long as sample " + std::to_string(longest) + " (" +
                                  std::to_string(lengths[longest]) + " tokens) exceed max_tokens " +
                                  std::to_string(config.max_tokens));
  on_epoch();
}

void BucketedSampler::sort_window(std::vector<std::uint64_t>& window) {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  // Ascending (length, index): a total order, so any sort gives the same window. Packed entries
  // (length << index_bits_ | index, see make_plan) are sorted as integers, without looking a length
  // up per comparison: through a bitmap of their indices where those are dense, else by radix.
  if (index_bits_ > 0) {
    if (!sampling_detail::sort_dense_keys(window, index_bits_, lengths.data(), spare_keys_, window_bitmap_,
                                          length_starts_))
      sampling_detail::sort_keys(window, spare_keys_);
  } else {
    std::sort(window.begin(), window.end(), [&](std::uint64_t a, std::uint64_t b) {
      const std::int64_t length_a = lengths[static_cast<std::size_t>(a)],
                         length_b = lengths[static_cast<std::size_t>(b)];
      return length_a != length_b ? length_a < length_b : a < b;
    });
  }
}

void BucketedSampler::add_batch(const Span& batch, std::int64_t tokens) {
  sequence_.push_back(batch);
  largest_batch_ = std::max(largest_batch_, batch.count);
  largest_batch_tokens_ = std::max(largest_batch_tokens_, tokens);
}

void BucketedSampler::pack_window(std::vector<std::uint64_t>& window, bool last_window) {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  // Entries: (length << index_bits_ | index) where packed, else the index (see make_plan); sorted.
  const bool packed = index_bits_ > 0;
  const std::uint64_t index_mask = packed ? (std::uint64_t{1} << index_bits_) - 1 : ~std::uint64_t{0};
  auto length_of = [&](std::uint64_t entry) {
    return packed ? static_cast<std::int64_t>(entry >> index_bits_) : lengths[static_cast<std::size_t>(entry)];
  };
  const auto size = static_cast<std::int64_t>(window.size());
  const std::int64_t multiple = config_.batch_size_multiple;
  const std::int64_t count_limit =
      config_.max_batch_size > 0 ? config_.max_batch_size : std::numeric_limits<std::int64_t>::max();
  std::int64_t start = 0;
  // Whether the `count` samples from `start` make a batch: ascending lengths, so the last is the
  // batch's longest. True up to the most that fit and false after: found by doubling, then halving.
  const auto fits = [&](std::int64_t count) {
    return count <= count_limit && count <= size - start &&
           count <= config_.max_tokens / length_of(window[static_cast<std::size_t>(start + count - 1)]);
  };
  while (start < size) {
    std::int64_t count = 1, step = 1;  // one always fits: no sample is longer than max_tokens
    while (fits(count + step)) {
      count += step;
      step *= 2;
    }
    for (std::int64_t beyond = count + step; beyond - count > 1;) {
      const std::int64_t middle = count + (beyond - count) / 2;
      (fits(middle) ? count : beyond) = middle;
    }
    if (start + count == size && !last_window) break;     // partial: carried into the next window
    if (start + count < size) count -= count % multiple;  // >= multiple: validated against the longest sample
    const std::uint64_t* const in = window.data() + start;
    std::size_t first = 0;
    std::int64_t tokens = 0;
    with_samples([&](auto& samples) {
      using Index = typename std::remove_reference_t<decltype(samples)>::value_type;
      first = samples.size();
      samples.resize(first + static_cast<std::size_t>(count));
      Index* const out = samples.data() + first;
      for (std::int64_t k = 0; k < count; ++k) {
        out[k] = static_cast<Index>(in[k] & index_mask);
        tokens += length_of(in[k]);
      }
    });
    add_batch(Span{static_cast<std::int64_t>(first), count, length_of(in[count - 1])}, tokens);
    start += count;
  }
  window.erase(window.begin(), window.begin() + start);
}

std::size_t BucketedSampler::pack_counts(const std::size_t* counts, std::size_t span, std::int64_t shortest,
                                         bool last_window, std::size_t first) {
  const std::int64_t multiple = config_.batch_size_multiple;
  const std::int64_t count_limit =
      config_.max_batch_size > 0 ? config_.max_batch_size : std::numeric_limits<std::int64_t>::max();
  std::int64_t size = 0;
  for (std::size_t length = 0; length < span; ++length) size += static_cast<std::int64_t>(counts[length]);
  // The window's sorted samples as runs of one length each: the samples of length shortest + `run`
  // begin at position `run_begin`, and the next batch's first lies among them.
  const auto next_run = [&](std::size_t& run, std::int64_t& run_begin) {
    run_begin += static_cast<std::int64_t>(counts[run]);
    do ++run;
    while (run < span && counts[run] == 0);
  };
  std::size_t run = 0;
  std::int64_t run_begin = 0;
  while (run < span && counts[run] == 0) ++run;
  std::int64_t start = 0;
  while (start < size) {
    // The most samples from `start` that fit, as pack_window finds them: a batch ending in a run
    // fits up to max_tokens / the run's length samples, and the first run where a batch cannot end
    // ends the search (the lengths only grow).
    const std::int64_t most = std::min(count_limit, size - start);
    std::int64_t count = 0;
    std::size_t ending = run;
    std::int64_t begin = run_begin;
    for (;;) {
      const std::int64_t end = begin + static_cast<std::int64_t>(counts[ending]);
      const std::int64_t fewest = std::max(begin, start) - start + 1;
      const std::int64_t fit =
          std::min({end - start, config_.max_tokens / (shortest + static_cast<std::int64_t>(ending)), most});
      if (fit < fewest) break;
      count = fit;
      if (fit < end - start) break;
      next_run(ending, begin);
      if (ending == span) break;
    }
    if (start + count == size && !last_window) break;     // partial: carried into the next window
    if (start + count < size) count -= count % multiple;  // >= multiple: validated against the longest sample
    std::int64_t tokens = 0, longest = 0;
    for (std::int64_t position = start, stop = start + count; position < stop;) {
      const std::int64_t end = run_begin + static_cast<std::int64_t>(counts[run]);
      const std::int64_t take = std::min(end, stop) - position;
      longest = shortest + static_cast<std::int64_t>(run);
      tokens += take * longest;
      position += take;
      if (position == end) next_run(run, run_begin);
    }
    add_batch(Span{static_cast<std::int64_t>(first) + start, count, longest}, tokens);
    start += count;
  }
  return static_cast<std::size_t>(size - start);
}

void BucketedSampler::on_epoch() {
  if (!config_.shared_plan) {
    make_plan();
    return;
  }
  // One plan per epoch and configuration (the seed included); the node's ranks make them in turn,
  // and the next epoch's maker makes its first part while it waits for this one, then goes on with
  // the second's first step while the wait lasts.
  config_.shared_plan->share(
      plan_key(epoch()), static_cast<std::uint64_t>(seed()) + static_cast<std::uint64_t>(epoch()),
      [this] { make_plan(); }, [this] { return plan_pieces(); },
      [this](const std::byte* data, std::int64_t bytes) { return load_plan(data, bytes); },
      [this, begun = false]() mutable {
        if (begun) return continue_next_plan();
        begun = true;
        return prepare_next_plan();
      });
}

std::uint64_t BucketedSampler::plan_key(std::int64_t epoch) const {
  Fnv1a64 key;
  key.add(config_hash());
  key.add(epoch);
  return key.value() | 1;
}

// A shared plan: the batch count, the largest batch and the most tokens of a batch, the samples
// (N, as the sampler holds them: 4 or 8 bytes each), then the batches' spans.
std::int64_t BucketedSampler::shared_plan_bytes(std::int64_t batches) const noexcept {
  static_assert(sizeof(Span) == 3 * sizeof(std::int64_t) && std::is_trivially_copyable_v<Span>,
                "a plan's spans are shared as bytes");
  return plan_bytes(static_cast<std::int64_t>(config_.lengths.size()), batches, index_bytes());
}

std::int64_t BucketedSampler::plan_bytes(std::int64_t samples, std::int64_t batches, std::size_t index_bytes) noexcept {
  return static_cast<std::int64_t>(sizeof(plan_header_) + index_bytes * static_cast<std::size_t>(samples) +
                                   sizeof(Span) * static_cast<std::size_t>(batches));
}

std::vector<SharedPlan::Piece> BucketedSampler::plan_pieces() {
  plan_header_[0] = num_batches();
  plan_header_[1] = largest_batch_;
  plan_header_[2] = largest_batch_tokens_;
  SharedPlan::Piece samples{};
  with_samples([&](auto& indices) {
    samples = {indices.data(), static_cast<std::int64_t>(indices.size() * sizeof(indices[0]))};
  });
  return {{plan_header_, static_cast<std::int64_t>(sizeof(plan_header_))},
          samples,
          {sequence_.data(), static_cast<std::int64_t>(sequence_.size() * sizeof(Span))}};
}

bool BucketedSampler::load_plan(const std::byte* data, std::int64_t bytes) {
  // The bytes may be overwritten while they are read (the caller then throws the result away): every
  // size is checked against `bytes` before it is used.
  const auto n = static_cast<std::int64_t>(config_.lengths.size());
  std::int64_t header[sizeof(plan_header_) / sizeof(std::int64_t)];
  const std::size_t width = index_bytes();
  if (bytes < plan_bytes(n, 0, width)) return false;
  std::memcpy(header, data, sizeof(header));
  const std::int64_t batches = header[0];
  if (batches < 0 || batches > n || bytes != plan_bytes(n, batches, width)) return false;
  sequence_.resize(static_cast<std::size_t>(batches));
  const std::byte* const samples = data + sizeof(header);
  std::memcpy(static_cast<void*>(sequence_.data()), samples + static_cast<std::size_t>(n) * width,
              sequence_.size() * sizeof(Span));
  largest_batch_ = header[1];
  largest_batch_tokens_ = header[2];
  // A plan every later step can rely on: spans of at least one sample inside the N, covering N in
  // all, the largest as said, the most tokens of a batch within the costliest batch's padded
  // tokens (and so within max_tokens).
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
  // This rank's batches only (batch(): step * R + rank, the padding from the sequence's start):
  // their samples copied together and checked to be samples, their spans pointed at the copy; the
  // other ranks' spans keep their sizes and costs and point at none (first -1). A rank of R copies
  // about 1/R of the plan's samples, which the node's maker has just written.
  const std::int64_t world = world_size(), steps = num_steps();
  std::vector<char> mine(static_cast<std::size_t>(batches), 0);
  std::int64_t held = 0;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto position = static_cast<std::size_t>((step * world + rank()) % batches);
    if (mine[position] == 0) held += sequence_[position].count;
    mine[position] = 1;
  }
  bool outside = false;
  with_samples([&](auto& indices) {
    using Index = typename std::remove_reference_t<decltype(indices)>::value_type;
    using Unsigned = std::make_unsigned_t<Index>;
    indices.resize(static_cast<std::size_t>(held));
    Index* out = indices.data();
    for (std::size_t position = 0; position < sequence_.size(); ++position) {
      Span& span = sequence_[position];
      if (mine[position] == 0) {
        span.first = -1;
        continue;
      }
      std::memcpy(out, samples + static_cast<std::size_t>(span.first) * sizeof(Index),
                  static_cast<std::size_t>(span.count) * sizeof(Index));
      span.first = out - indices.data();
      out += span.count;
    }
    // Then checked to be samples, in one pass over the copy that the compiler vectorizes (a check
    // of each sample inside the copy's loop doubles the copy's time: w3 at 2 ranks, 0.10 against
    // 0.05 ms an epoch).
    const auto last = static_cast<Unsigned>(n - 1);
    Unsigned beyond = 0;
    for (const Index sample : indices) beyond |= static_cast<Unsigned>(static_cast<Unsigned>(sample) > last);
    outside = beyond != 0;
  });
  return !outside;
}

std::int64_t BucketedSampler::window_tokens() const noexcept {
  // Saturating: a megabatch of 0, or one too large to count, is the epoch.
  return config_.megabatch == 0 || config_.megabatch > std::numeric_limits<std::int64_t>::max() / config_.max_tokens
             ? std::numeric_limits<std::int64_t>::max()
             : config_.megabatch * config_.max_tokens;
}

std::uint64_t BucketedSampler::most_windows() const noexcept {
  // Each window but the last holds at least window_tokens.
  return total_tokens_ / static_cast<std::uint64_t>(window_tokens()) + 1;
}

bool BucketedSampler::markable() const noexcept {
  return index_bits_ > 0 &&
         sampling_detail::windows_markable(config_.lengths.size(), shortest_length_, longest_length_, most_windows());
}

bool BucketedSampler::order_windows(std::int64_t epoch, sampling_detail::OrderWords& order,
                                    sampling_detail::WindowMarks& marks) const {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  const auto n = static_cast<std::int64_t>(lengths.size());
  const bool packed = index_bits_ > 0;
  const std::uint64_t order_seed = derive_seed(seed(), epoch, sample_stream);
  const std::int64_t tokens = window_tokens();
  // The epoch's order of samples, shuffled as words: Fisher-Yates moves them as it would move the
  // bare indices, and each length is then read in index order, not at a random place per sample.
  if (narrow_order_) {
    // As 32-bit words, half the memory the shuffle moves them in, in the marks' order, whose words
    // the marking replaces with their indices.
    marks.order.resize(static_cast<std::size_t>(n));
    std::uint32_t* const words = marks.order.data();
    // From the 2-byte buckets where the sampler holds them, else from the lengths (the same loop);
    // length - shortest fits above the index (narrow_order_). From locals, so that the compiler
    // vectorizes the loop rather than read index_bits_ again after each store.
    const int index_bits = index_bits_;
    const auto fill = [&](const auto bucket_of) {
      for (std::size_t sample = 0; sample < static_cast<std::size_t>(n); ++sample)
        words[sample] =
            static_cast<std::uint32_t>(bucket_of[sample]) << index_bits | static_cast<std::uint32_t>(sample);
    };
    if (buckets_)
      fill(buckets_->data());
    else
      fill(sampling_detail::LengthBuckets{lengths.data(), static_cast<std::uint64_t>(shortest_length_)});
    if (config_.shuffle) sampling_detail::shuffle_seeded(words, static_cast<std::size_t>(n), order_seed);
    if (sampling_detail::mark_windows(words, static_cast<std::size_t>(n), index_bits_, shortest_length_,
                                      longest_length_, tokens, most_windows(), marks))
      return true;
    // (Never: most_windows bounds the windows.) As words of 64.
  }
  order.wide.resize(static_cast<std::size_t>(n));
  std::uint64_t* const entries = order.wide.data();
  for (std::int64_t sample = 0; sample < n; ++sample)
    entries[static_cast<std::size_t>(sample)] =
        packed ? static_cast<std::uint64_t>(lengths[static_cast<std::size_t>(sample)]) << index_bits_ |
                     static_cast<std::uint64_t>(sample)
               : static_cast<std::uint64_t>(sample);
  if (config_.shuffle) sampling_detail::shuffle_seeded(entries, static_cast<std::size_t>(n), order_seed);

  // Windows of about `megabatch` batches' worth of tokens: each ends once its new samples reach
  // that (the carry of the window before is < one batch), or with the order.
  if (markable() && sampling_detail::mark_windows(entries, static_cast<std::size_t>(n), index_bits_, shortest_length_,
                                                  longest_length_, tokens, most_windows(), marks))
    return true;
  marks.ends.clear();
  std::int64_t window_sum = 0;
  for (std::int64_t position = 0; position < n; ++position) {
    const std::uint64_t entry = entries[static_cast<std::size_t>(position)];
    window_sum += packed ? static_cast<std::int64_t>(entry >> index_bits_) : lengths[static_cast<std::size_t>(entry)];
    if (window_sum >= tokens || position + 1 == n) {
      marks.ends.push_back(static_cast<std::size_t>(position + 1));
      window_sum = 0;
    }
  }
  return false;
}

bool BucketedSampler::prepare_next_plan() {
  // Only the marks outlive the order (6 bytes a sample with their windows, not 8): nothing to make
  // ahead without them.
  if (!markable()) return false;
  // An optimisation only: whatever fails here, the plan makes its first part itself.
  try {
    sampling_detail::OrderWords order;
    sampling_detail::WindowMarks marks;
    const std::int64_t next = epoch() + 1;
    if (!order_windows(next, order, marks)) return false;
    marks.window_of.resize(marks.order.size());  // here, so that continue_next_plan allocates nothing
    std::lock_guard<std::mutex> lock(ahead_->mutex);
    ahead_->key = plan_key(next);
    ahead_->marks = std::move(marks);
    return ahead_->marks.marked < ahead_->marks.order.size();
  } catch (...) {
  }
  return false;
}

bool BucketedSampler::continue_next_plan() {
  // A short slice (w3: 16,384 positions in about 20 us, its marks within a core's cache), so that
  // the plan awaited is taken soon after it is published.
  constexpr std::size_t kSlice = 16384;
  try {
    std::lock_guard<std::mutex> lock(ahead_->mutex);
    return ahead_->key == plan_key(epoch() + 1) && sampling_detail::mark_positions(ahead_->marks, kSlice);
  } catch (...) {  // as prepare_next_plan: the plan's maker marks what is left
  }
  return false;
}

std::int64_t BucketedSampler::plans_begun_ahead() const {
  std::lock_guard<std::mutex> lock(ahead_->mutex);
  return ahead_->used;
}

void BucketedSampler::make_plan() {
  const SharedView<std::int64_t>& lengths = config_.lengths;
  const auto n = static_cast<std::int64_t>(lengths.size());
  sequence_.clear();
  largest_batch_ = 0;
  largest_batch_tokens_ = 0;

  // The order cut into windows, each window's samples marked for dealing out all at once where that
  // applies: made ahead for this epoch (prepare_next_plan) or here.
  sampling_detail::OrderWords order;
  sampling_detail::WindowMarks marks;
  bool marked = false;
  {
    std::lock_guard<std::mutex> lock(ahead_->mutex);
    if (ahead_->key == plan_key(epoch())) {
      std::swap(marks, ahead_->marks);
      ahead_->key = 0;
      ++ahead_->used;
      marked = true;
    }
  }
  if (!marked) marked = order_windows(epoch(), order, marks);
  if (marked) {
    // The batches packed from each window's length counts, then every sample dealt to its place.
    order = sampling_detail::OrderWords();
    const std::int64_t shortest = static_cast<std::int64_t>(marks.shortest);
    const auto span = static_cast<std::size_t>(marks.lengths);
    bool dealt = false;
    with_samples([&](auto& indices) {
      indices.resize(static_cast<std::size_t>(n));  // every entry written: kept from the plan before where it holds N
      dealt = sampling_detail::place_windows(marks,
                                             [&](const std::size_t* counts, bool last, std::size_t first) {
                                               return pack_counts(counts, span, shortest, last, first);
                                             }) &&
              (buckets_ ? sampling_detail::deal_windows(indices.data(), buckets_->data(), marks)
                        : sampling_detail::deal_windows(indices.data(), lengths.data(), marks));
      if (!dealt) indices.clear();  // no plan rather than a plan of two epochs' samples
    });
    if (!dealt) {
      sequence_.clear();
      STRIDER_THROW(Error, "bucketed: the epoch's windows do not match the samples' lengths (a bug)");
    }
  } else {
    // Each window sorted, then packed behind the carry of the window before (its longest samples).
    with_samples([&](auto& indices) {
      indices.clear();
      indices.reserve(static_cast<std::size_t>(n));
    });
    std::vector<std::uint64_t>& window = keys_;
    window.clear();
    std::size_t window_begin = 0;
    for (const std::size_t end : marks.ends) {
      window.insert(window.end(), order.wide.begin() + static_cast<std::ptrdiff_t>(window_begin),
                    order.wide.begin() + static_cast<std::ptrdiff_t>(end));
      sort_window(window);
      pack_window(window, end == static_cast<std::size_t>(n));
      window_begin = end;
    }
    order = sampling_detail::OrderWords();
  }

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
  if (span.first < 0)
    STRIDER_THROW(UsageError, "batch " + std::to_string(position) +
                                  " is another rank's: this rank copied only its own batches of its node's plan");
  with_samples([&](const auto& samples) {
    indices.assign(samples.begin() + span.first, samples.begin() + span.first + span.count);
  });
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
