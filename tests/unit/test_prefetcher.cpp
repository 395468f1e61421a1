// The prefetcher against direct reads of the same plan: order, content, determinism across depths,
// error propagation, stop and restart, destruction while filling. Also run under ThreadSanitizer.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "batch_hashes.hpp"
#include "fake_reader.hpp"
#include "pipeline/thread_layout.hpp"
#include "strider/bench/prefetch_account.hpp"
#include "strider/core/error.hpp"
#include "strider/core/hash.hpp"
#include "strider/pipeline/host_allocator.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/distributed_sampler.hpp"

using namespace strider;
using strider::testing::FakeReader;
using strider::testing::FakeReaderOptions;

namespace {

DistributedSampler make_sampler(std::int64_t n, std::int64_t batch, int world = 2, int rank = 1) {
  DistributedSamplerConfig config;
  config.dataset_size = n;
  config.batch_size = batch;
  config.seed = 11;
  return DistributedSampler(config, world, rank);
}

/// The same plan read directly, batch by batch, with the reader alone.
std::vector<std::uint64_t> direct_hashes(const FakeReaderOptions& options, const Sampler& sampler) {
  FakeReader reader(options);
  return strider::testing::direct_batch_hashes(reader, sampler);
}

/// Runs an epoch that must fail with the fake reader's DataError containing `message` (thrown from
/// the fake, not re-made on the way); returns the batches delivered before it.
int batches_before_failure(Prefetcher& prefetcher, const Sampler& sampler, const std::string& message) {
  prefetcher.start_epoch(sampler);
  int delivered = 0;
  bool caught = false;
  try {
    while (auto batch = prefetcher.next()) ++delivered;
  } catch (const DataError& error) {
    caught = true;
    REQUIRE(std::string(error.what()).find(message) != std::string::npos);
    REQUIRE(error.context().file == "tests/unit/fake_reader.hpp");
  }
  REQUIRE(caught);
  return delivered;
}

}  // namespace

TEST_CASE("prefetched batches equal direct reads of the same plan, for every depth", "[prefetcher]") {
  for (bool variable_length : {false, true}) {
    FakeReaderOptions options;
    options.samples = 517;
    options.variable_length = variable_length;
    DistributedSampler sampler = make_sampler(options.samples, 16);
    sampler.set_epoch(3);
    const auto expected = direct_hashes(options, sampler);
    REQUIRE(expected.size() == static_cast<std::size_t>(sampler.num_steps()));
    for (int depth = 1; depth <= 8; ++depth) {
      CAPTURE(variable_length, depth);
      Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{depth, nullptr});
      REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == expected);
      const PrefetchStats stats = prefetcher.stats();
      REQUIRE(stats.batches == sampler.num_steps());
      REQUIRE(stats.samples == sampler.samples_per_rank());
      REQUIRE(stats.time_to_first_batch_seconds >= 0);
      REQUIRE(stats.stall_fraction() >= 0);
      REQUIRE(stats.stall_fraction() <= 1);
    }
  }
}

TEST_CASE("the ring persists across epochs; a resumed start delivers the tail", "[prefetcher]") {
  FakeReaderOptions options;
  options.samples = 300;
  DistributedSampler sampler = make_sampler(options.samples, 8);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{3, nullptr});
  std::size_t buffer_bytes = 0;
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    sampler.set_epoch(epoch);
    const auto expected = direct_hashes(options, sampler);
    REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == expected);
    if (epoch == 0) buffer_bytes = prefetcher.buffer_bytes();
    REQUIRE(prefetcher.buffer_bytes() == buffer_bytes);  // not re-allocated per epoch
    const auto tail = strider::testing::prefetched_batch_hashes(prefetcher, sampler, 5);
    REQUIRE(tail == std::vector<std::uint64_t>(expected.begin() + 5, expected.end()));
  }
  // After the end of an epoch next() keeps saying so.
  REQUIRE_FALSE(prefetcher.next().has_value());
  // A start at the epoch's end (a resume saved after its last step) or with nothing between first
  // and end delivers no batch, without an error.
  prefetcher.start_epoch(sampler, sampler.num_steps());
  REQUIRE_FALSE(prefetcher.next().has_value());
  prefetcher.start_epoch(sampler, 4, 4);
  REQUIRE_FALSE(prefetcher.next().has_value());
  REQUIRE_THROWS_AS(prefetcher.start_epoch(sampler, 5, 4), UsageError);
}

TEST_CASE("an I/O error reaches the consumer as the original error, and the next epoch works", "[prefetcher]") {
  FakeReaderOptions options;
  options.samples = 200;
  options.fail_at_read = 4;
  DistributedSampler sampler = make_sampler(options.samples, 10);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{2, nullptr});
  REQUIRE(batches_before_failure(prefetcher, sampler, "injected read failure at read 4") == 4);
  // The failure ended that epoch; the next one runs (the fake fails only once).
  sampler.set_epoch(1);
  options.fail_at_read = -1;
  const auto expected = direct_hashes(options, sampler);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == expected);
}

TEST_CASE("a reader that pays per round trip gets several steps per read, and the same batches", "[prefetcher]") {
  // The reader asks for 5 batches per read; the prefetcher gives it at most that and a quarter of
  // the ring per read_batches() call, on the I/O thread and on the consumer's thread alike.
  for (bool io_thread : {true, false}) {
    for (bool variable_length : {false, true}) {
      for (int depth : {1, 4, 8, 64}) {
        CAPTURE(io_thread, variable_length, depth);
        FakeReaderOptions options;
        options.samples = 517;
        options.variable_length = variable_length;
        options.batches_per_read = 5;
        DistributedSampler sampler = make_sampler(options.samples, 4);  // 65 steps
        options.probe = std::make_shared<strider::testing::FakeReaderProbe>();
        PrefetcherOptions prefetcher_options{depth, nullptr};
        prefetcher_options.io_thread = io_thread;
        Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
        FakeReaderOptions direct = options;
        direct.probe = nullptr;
        for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
          sampler.set_epoch(epoch);
          REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(direct, sampler));
        }
        const std::int64_t most = std::min(5, std::max(1, depth / 4));
        REQUIRE(options.probe->reads == 2 * sampler.num_steps());  // every batch read once
        REQUIRE(options.probe->largest_group == (most > 1 ? most : 0));
        REQUIRE((options.probe->batch_groups > 0) == (most > 1));
        REQUIRE(prefetcher.stats().batches == 2 * sampler.num_steps());
      }
    }
  }
}

TEST_CASE("a failed read of several steps ends the epoch at its first step; the next epoch works", "[prefetcher]") {
  for (bool io_thread : {true, false}) {
    CAPTURE(io_thread);
    FakeReaderOptions options;
    options.samples = 400;
    options.batches_per_read = 4;
    options.fail_at_read = 6;  // in the second read: steps 4..7
    DistributedSampler sampler = make_sampler(options.samples, 10);
    PrefetcherOptions prefetcher_options{16, nullptr};
    prefetcher_options.io_thread = io_thread;
    Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
    // The first read's steps; none of the failed one's.
    REQUIRE(batches_before_failure(prefetcher, sampler, "injected read failure at read 6") == 4);
    REQUIRE_FALSE(prefetcher.next().has_value());
    sampler.set_epoch(1);
    options.fail_at_read = -1;
    REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
  }
}

TEST_CASE("stop mid-epoch, change the epoch, restart", "[prefetcher]") {
  FakeReaderOptions options;
  options.samples = 1000;
  DistributedSampler sampler = make_sampler(options.samples, 4);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{4, nullptr});
  prefetcher.start_epoch(sampler);
  for (int i = 0; i < 3; ++i) {
    auto batch = prefetcher.next();
    REQUIRE(batch.has_value());
    REQUIRE(batch->step() == i);
  }
  auto held = prefetcher.next();  // held across stop(): released afterwards
  prefetcher.stop();
  REQUIRE_FALSE(prefetcher.next().has_value());
  held.reset();
  sampler.set_epoch(1);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
}

TEST_CASE("a read cancelled by stop() gives its buffer back: the whole ring can be held after early stops",
          "[prefetcher]") {
  // Each round takes one batch and stops at once, mostly while the I/O thread reads the next one
  // (each read takes 2 ms): that read is cancelled and its buffer must return to the ring. A lost
  // buffer would make the last next() below wait for ever (the ctest timeout ends it).
  FakeReaderOptions options;
  options.samples = 400;
  options.delay = std::chrono::microseconds(2000);
  DistributedSampler sampler = make_sampler(options.samples, 4);
  constexpr int depth = 2;
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{depth, nullptr});
  for (int round = 0; round < 20; ++round) {
    prefetcher.start_epoch(sampler);
    REQUIRE(prefetcher.next().has_value());  // taken and released at once
    prefetcher.stop();
  }
  options.delay = std::chrono::microseconds(0);
  const auto expected = direct_hashes(options, sampler);
  prefetcher.start_epoch(sampler);
  std::vector<Batch> held;
  for (int k = 0; k < depth; ++k) {
    auto batch = prefetcher.next();
    REQUIRE(batch.has_value());
    REQUIRE(strider::testing::batch_hash(*batch) == expected[static_cast<std::size_t>(k)]);
    held.push_back(std::move(*batch));
  }
}

TEST_CASE("destruction while the I/O thread is filling stops it and releases the reader", "[prefetcher]") {
  for (int depth : {1, 2, 8}) {
    CAPTURE(depth);
    FakeReaderOptions options;
    options.samples = 10000;
    options.delay = std::chrono::microseconds(200);
    options.probe = std::make_shared<strider::testing::FakeReaderProbe>();
    const auto probe = options.probe;
    DistributedSampler sampler = make_sampler(options.samples, 4);
    auto prefetcher =
        std::make_unique<Prefetcher>(std::make_unique<FakeReader>(options), PrefetcherOptions{depth, nullptr});
    prefetcher->start_epoch(sampler);
    {
      auto first = prefetcher->next();
      REQUIRE(first.has_value());
    }
    prefetcher.reset();  // mid-epoch, ring full or filling (a hang here ends at the ctest timeout)
    // The reader went with the prefetcher, and no read was still running when it did: the I/O
    // thread had stopped (joined), not been left behind reading a destroyed reader.
    REQUIRE(probe->destroyed);
    REQUIRE(probe->in_flight_at_destruction == 0);
    // The epoch was interrupted, not read to its end: the I/O thread reads at most one batch per
    // ring slot ahead of the consumer (depth slots, plus the one the consumer took and released).
    REQUIRE(probe->reads >= 1);
    REQUIRE(probe->reads <= depth + 1);
    REQUIRE(probe->reads < sampler.num_steps());
  }
}

TEST_CASE("a consumer holding every buffer gets an error instead of a hang", "[prefetcher]") {
  FakeReaderOptions options;
  options.samples = 100;
  DistributedSampler sampler = make_sampler(options.samples, 2);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{2, nullptr});
  prefetcher.start_epoch(sampler);
  auto a = prefetcher.next();
  auto b = prefetcher.next();
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE_THROWS_AS(prefetcher.next(), UsageError);
  b.reset();
  auto c = prefetcher.next();
  REQUIRE(c.has_value());
  REQUIRE(c->step() == 2);
}

TEST_CASE("a wait for a slow read calls between_waits, whose exception leaves next() with no batch taken",
          "[prefetcher]") {
  // Each read takes 300 ms: a wait for the first batch spans about two slices of kBetweenWaits.
  FakeReaderOptions options;
  options.samples = 40;
  options.delay = std::chrono::milliseconds(300);
  DistributedSampler sampler = make_sampler(options.samples, 4);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{2, nullptr});
  prefetcher.start_epoch(sampler);
  int calls = 0;
  REQUIRE_THROWS_WITH(prefetcher.next([&] {
    if (++calls == 2) throw std::runtime_error("interrupted");
  }),
                      "interrupted");
  REQUIRE(calls == 2);
  // Nothing was taken: the next call delivers step 0, counting further waits without throwing.
  int later_calls = 0;
  std::vector<std::int64_t> steps;
  while (auto batch = prefetcher.next([&] { ++later_calls; })) steps.push_back(batch->step());
  REQUIRE(steps.size() == static_cast<std::size_t>(sampler.num_steps()));
  REQUIRE(steps.front() == 0);
  REQUIRE(later_calls > 0);
}

TEST_CASE("bad prefetcher options are usage errors", "[prefetcher]") {
  FakeReaderOptions options;
  REQUIRE_THROWS_AS(Prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{0, nullptr}), UsageError);
  REQUIRE_THROWS_AS(Prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{65, nullptr}), UsageError);
  REQUIRE_THROWS_AS(Prefetcher(nullptr, PrefetcherOptions{}), UsageError);
  DistributedSampler sampler = make_sampler(options.samples, 2);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{});
  REQUIRE_THROWS_AS(prefetcher.start_epoch(sampler, sampler.num_steps() + 1), UsageError);
}

TEST_CASE("the auto ring depth holds 16 MiB of batches, within 4..64; an explicit depth is kept", "[prefetcher]") {
  DatasetInfo fixed;
  fixed.num_samples = 1000000;
  fixed.sample_bytes = 256;
  REQUIRE(prefetch_depth(0, fixed, 256, 0) == 64);   // 64 KiB batches: 256 wanted, capped
  REQUIRE(prefetch_depth(0, fixed, 4096, 0) == 16);  // 1 MiB batches
  REQUIRE(prefetch_depth(0, fixed, 5000, 0) == 14);  // 1.22 MiB: rounded up
  REQUIRE(prefetch_depth(0, fixed, 65536, 0) == 4);  // 16 MiB batches: the floor
  REQUIRE(prefetch_depth(0, fixed, 0, 0) == 4);      // the epoch is one batch
  DatasetInfo sequences;
  sequences.variable_length = true;
  sequences.element_type = ElementType::int32;
  sequences.num_samples = 1000;
  sequences.num_tokens = 64000;                             // 64 tokens a row on average
  REQUIRE(prefetch_depth(0, sequences, 0, 1 << 20) == 4);   // 4 MiB token budget
  REQUIRE(prefetch_depth(0, sequences, 0, 1 << 18) == 16);  // 1 MiB token budget
  REQUIRE(prefetch_depth(0, sequences, 1024, 0) == 64);     // 1024 rows x 256 bytes: 256 wanted
  DatasetInfo empty;
  REQUIRE(prefetch_depth(0, empty, 32, 0) == 4);
  REQUIRE(prefetch_depth(3, fixed, 256, 0) == 3);  // an explicit --prefetch is kept
}

TEST_CASE("prefetch_depth leaves the I/O thread a buffer when the consumer holds two batches", "[prefetcher]") {
  // A trainer that stages batch k+1 on a device while it computes on batch k holds two buffers: a
  // ring of two would leave the I/O thread nothing to read into, so the least depth is three.
  DatasetInfo fixed;
  fixed.num_samples = 1000000;
  fixed.sample_bytes = 256;
  REQUIRE(prefetch_depth(1, fixed, 256, 0, 2) == 3);
  REQUIRE(prefetch_depth(2, fixed, 256, 0, 2) == 3);
  REQUIRE(prefetch_depth(3, fixed, 256, 0, 2) == 3);
  REQUIRE(prefetch_depth(7, fixed, 256, 0, 2) == 7);    // deeper requests are kept
  REQUIRE(prefetch_depth(0, fixed, 65536, 0, 2) == 4);  // auto: the floor of 4 is already enough
  REQUIRE(prefetch_depth(0, fixed, 65536, 0, 5) == 6);  // auto with five held: six
  REQUIRE(prefetch_depth(1, fixed, 256, 0, 1) == 1);    // one held: a single buffer is allowed
  REQUIRE(prefetch_depth(2, fixed, 256, 0) == 2);       // the default holds one
  REQUIRE(prefetch_depth(0, fixed, 256, 0, 2) == 64);   // auto above the floor is unchanged
}

TEST_CASE("a ring of three keeps the next batch read while the consumer holds two", "[prefetcher]") {
  // The consumer holds batch k and k+1 (the staged one); the third buffer receives k+2 without any
  // release, so taking it never finds the ring exhausted.
  FakeReaderOptions options;
  options.samples = 64;
  DistributedSampler sampler = make_sampler(options.samples, 4);  // 16 steps
  const auto expected = direct_hashes(options, sampler);
  const int depth = prefetch_depth(2, FakeReader(options).info(), 4, 0, 2);
  REQUIRE(depth == 3);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{depth, nullptr});
  prefetcher.start_epoch(sampler);
  std::vector<std::uint64_t> seen;
  std::optional<Batch> current = prefetcher.next();
  std::optional<Batch> staged = prefetcher.next();
  while (current) {
    seen.push_back(strider::testing::batch_hash(*current));
    std::optional<Batch> after = prefetcher.next();  // a third buffer while two are held
    current = std::move(staged);
    staged = std::move(after);
  }
  REQUIRE(seen == expected);
}

TEST_CASE("a deep ring delivers whether the consumer releases batches at once or holds them", "[prefetcher]") {
  // release_slot wakes the I/O thread only once a quarter of the ring is free (or little is ready);
  // a consumer that then holds the rest must still get the freed buffers refilled, not hang.
  FakeReaderOptions options;
  options.samples = 400;
  DistributedSampler sampler = make_sampler(options.samples, 2);  // 100 steps on this rank
  const auto expected = direct_hashes(options, sampler);
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{16, nullptr});
  prefetcher.start_epoch(sampler);
  std::vector<std::uint64_t> seen;
  std::vector<Batch> held;
  for (int round = 0; round < 5; ++round) {
    for (int k = 0; k < 3; ++k) {  // take and release at once: fewer than a quarter freed
      auto batch = prefetcher.next();
      REQUIRE(batch.has_value());
      seen.push_back(strider::testing::batch_hash(*batch));
    }
    for (int k = 0; k < 14; ++k) {  // then hold 14: the 14th finds nothing ready while 3 buffers are free
      auto batch = prefetcher.next();
      REQUIRE(batch.has_value());
      seen.push_back(strider::testing::batch_hash(*batch));
      held.push_back(std::move(*batch));
    }
    held.clear();
  }
  while (auto batch = prefetcher.next()) seen.push_back(strider::testing::batch_hash(*batch));
  REQUIRE(seen == expected);
}

namespace {

/// Page-aligned memory that remembers every block it handed out, so that a test can ask whether a
/// pointer lies in memory from this allocator, and counts them.
class CountingAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* pointer = inner_->allocate(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.push_back({static_cast<const std::byte*>(pointer), bytes});
    ++allocations_;
    return pointer;
  }
  void deallocate(void* pointer, std::size_t bytes) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), [&](const auto& b) { return b.first == pointer; }),
                    blocks_.end());
    }
    inner_->deallocate(pointer, bytes);
  }
  std::string name() const override { return "counting"; }
  int allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocations_;
  }
  /// True when [pointer, pointer + bytes) lies inside one live block.
  bool holds(const void* pointer, std::size_t bytes) const {
    const auto* begin = static_cast<const std::byte*>(pointer);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& block : blocks_)
      if (begin >= block.first && begin + bytes <= block.first + block.second) return true;
    return false;
  }
  std::size_t live_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.size();
  }

 private:
  std::shared_ptr<HostAllocator> inner_ = make_page_aligned_allocator();
  mutable std::mutex mutex_;
  std::vector<std::pair<const std::byte*, std::size_t>> blocks_;
  int allocations_ = 0;
};

}  // namespace

TEST_CASE("the ring grows in whole pages: slightly larger batches reuse it", "[prefetcher]") {
  FakeReaderOptions options;
  options.samples = 300;
  options.sample_floats = 16;  // 64 bytes a sample
  const auto allocator = std::make_shared<CountingAllocator>();
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{3, allocator});
  DistributedSampler eight = make_sampler(options.samples, 8), nine = make_sampler(options.samples, 9);
  eight.set_epoch(0);
  nine.set_epoch(0);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, eight) == direct_hashes(options, eight));
  const int first_allocations = allocator->allocations();
  REQUIRE(first_allocations > 0);
  REQUIRE(prefetcher.buffer_bytes() == 4096);
  // 9 samples of 64 bytes fit the page 8 took, and their offsets and labels the first allocation's.
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, nine) == direct_hashes(options, nine));
  REQUIRE(allocator->allocations() == first_allocations);
  // A batch past the page: every buffer again, in whole pages.
  DistributedSampler large = make_sampler(options.samples, 100);  // 6,400 bytes
  large.set_epoch(0);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, large) == direct_hashes(options, large));
  REQUIRE(allocator->allocations() > first_allocations);
  REQUIRE(prefetcher.buffer_bytes() == 8192);
}

TEST_CASE("a batch's samples, labels and offsets all come from the ring's allocator", "[prefetcher]") {
  // With the CUDA backend the allocator pins memory: anything a batch copies to the device from
  // elsewhere (a std::vector) would be pageable, and its asynchronous copy could block.
  for (bool variable_length : {false, true}) {
    CAPTURE(variable_length);
    FakeReaderOptions options;
    options.samples = 200;
    options.variable_length = variable_length;
    DistributedSampler sampler = make_sampler(options.samples, 8);
    const auto allocator = std::make_shared<CountingAllocator>();
    Prefetcher prefetcher(std::make_unique<FakeReader>(options), PrefetcherOptions{3, allocator});
    prefetcher.start_epoch(sampler);
    std::int64_t batches = 0;
    while (auto batch = prefetcher.next()) {
      const auto count = static_cast<std::size_t>(batch->size());
      REQUIRE(allocator->holds(batch->samples(), static_cast<std::size_t>(batch->samples_bytes())));
      REQUIRE(batch->labels() != nullptr);
      REQUIRE(allocator->holds(batch->labels(), count * sizeof(std::int32_t)));
      if (variable_length) {
        REQUIRE(batch->offsets() != nullptr);
        REQUIRE(allocator->holds(batch->offsets(), (count + 1) * sizeof(std::int64_t)));
      } else {
        REQUIRE(batch->offsets() == nullptr);
      }
      ++batches;
    }
    REQUIRE(batches == sampler.num_steps());
    // Samples and labels per buffer, offsets too for sequences.
    REQUIRE(allocator->live_blocks() == static_cast<std::size_t>(3 * (variable_length ? 3 : 2)));
  }
}

namespace {

/// Prefetcher options with the bench's account subscribed to the events.
PrefetcherOptions observed(int depth, const std::shared_ptr<strider::PrefetchAccount>& account) {
  PrefetcherOptions options{depth, nullptr};
  options.observer = account;
  return options;
}

}  // namespace

TEST_CASE("a consumer that finds the ring empty is woken per several batches, not per batch", "[prefetcher]") {
  // A slow reader and a consumer with nothing to do: the consumer always waits, and sleeps until
  // half the ring (8 of 16) is ready, so at most one sleep per 8 batches (plus the epoch's first
  // batch, which it takes alone, and the shorter wait for the epoch's last ones).
  FakeReaderOptions options;
  options.samples = 200;
  options.delay = std::chrono::microseconds(100);
  DistributedSampler sampler = make_sampler(options.samples, 1, 1, 0);  // 200 steps
  const auto expected = direct_hashes(options, sampler);
  const auto account = std::make_shared<strider::PrefetchAccount>();
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), observed(16, account));
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == expected);
  REQUIRE(prefetcher.stats().batches == 200);
  const strider::PrefetchAccountFigures figures = account->figures();
  REQUIRE(figures.consumer_sleeps >= 1);  // it did wait for the slow reader
  REQUIRE(figures.consumer_sleeps <= 200 / 8 + 2);
}

TEST_CASE("the observer's account: phases within the read time, the I/O thread's CPU counted", "[prefetcher]") {
  for (bool io_thread : {true, false}) {
    CAPTURE(io_thread);
    FakeReaderOptions options;
    options.samples = 2000;
    DistributedSampler sampler = make_sampler(options.samples, 4);  // 250 steps on this rank
    const auto account = std::make_shared<strider::PrefetchAccount>();
    PrefetcherOptions prefetcher_options = observed(8, account);
    prefetcher_options.io_thread = io_thread;
    Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
    REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
    const PrefetchStats stats = prefetcher.stats();
    const strider::PrefetchAccountFigures figures = account->figures();
    REQUIRE(stats.batches == 250);
    REQUIRE(figures.plan_seconds > 0);
    REQUIRE(figures.plan_seconds + figures.copy_seconds + figures.labels_seconds <= stats.io_seconds);
    REQUIRE(figures.consumer_handoff_seconds > 0);
    REQUIRE(figures.caller_thread_batches == (io_thread ? 0 : 250));
    if (io_thread) {
      REQUIRE(figures.io_thread_cpu_seconds > 0);
      REQUIRE(figures.handoff_seconds > 0);
      // The I/O thread gives the lock up after an epoch's last batch only by going to sleep, so once
      // the consumer has that batch the thread sleeps, and the next epoch's start wakes it. (The
      // first epoch may start before the new thread ever slept: it then needs no wake-up.)
      account->reset();
      REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
      REQUIRE(account->figures().io_wakeups >= 1);
    } else {
      REQUIRE(figures.io_thread_cpu_seconds == 0);
      REQUIRE(figures.handoff_seconds == 0);
      REQUIRE(figures.consumer_sleeps == 0);
    }
    account->reset();
    REQUIRE(account->figures().plan_seconds == 0);
    REQUIRE(account->figures().caller_thread_batches == 0);
  }
}

TEST_CASE("a tie between the thread layouts goes to the I/O thread only with a core to spare", "[prefetcher]") {
  using strider::pipeline_detail::cores_per_rank;
  using strider::pipeline_detail::keeps_caller_thread;
  // With a core to spare the consumer's thread must be more than 5% faster; without, the I/O thread.
  REQUIRE(keeps_caller_thread(100, 94, true));
  REQUIRE_FALSE(keeps_caller_thread(100, 96, true));
  REQUIRE_FALSE(keeps_caller_thread(94, 100, true));
  REQUIRE(keeps_caller_thread(100, 96, false));
  REQUIRE(keeps_caller_thread(96, 100, false));
  REQUIRE_FALSE(keeps_caller_thread(94, 100, false));
  // A rank's cores: its affinity mask, at most its share of the node's online cores.
  REQUIRE(cores_per_rank(2, 2, 1) == 2);   // one rank, two cores: one spare
  REQUIRE(cores_per_rank(2, 2, 2) == 1);   // two unbound ranks share two cores
  REQUIRE(cores_per_rank(1, 64, 4) == 1);  // bound to one core
  REQUIRE(cores_per_rank(16, 64, 4) == 16);
  REQUIRE(cores_per_rank(64, 64, 4) == 16);
  REQUIRE(cores_per_rank(8, 4, 8) == 0);  // more ranks than cores
  REQUIRE(cores_per_rank(8, 8, 0) == 8);  // no count of ranks: this one
  // As many ranks as the machine has cores: none has a second core for an I/O thread.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  REQUIRE(online >= 1);
  REQUIRE_FALSE(strider::pipeline_detail::has_spare_core(static_cast<int>(online)));
  REQUIRE_FALSE(strider::pipeline_detail::has_spare_core(2 * static_cast<int>(online)));
  // Plans made ahead, but where no core idles for them (no spare core, reads on the consumer's
  // thread) and no rank waits for one rank's plan (the distributed sampler's node order).
  using strider::pipeline_detail::plans_ahead;
  REQUIRE_FALSE(plans_ahead(true, false, false));  // every core busy with the ranks' own reads
  REQUIRE(plans_ahead(false, false, false));       // an I/O thread: the consumer's thread waits for it
  REQUIRE(plans_ahead(true, true, false));         // a core to spare
  REQUIRE(plans_ahead(true, false, true));         // the node's ranks would wait for one rank's shuffle
}

TEST_CASE("without a core to spare the layout measurement keeps the consumer's thread on a tie", "[prefetcher]") {
  // A reader that costs the same on either thread and no step: the two layouts' times per step are
  // within a few percent of each other more often than not, but whatever they are, the decision must
  // follow keeps_caller_thread's rule for no spare core.
  FakeReaderOptions options;
  options.samples = 1500;
  DistributedSampler sampler = make_sampler(options.samples, 1, 1, 0);
  PrefetcherOptions prefetcher_options{8, nullptr};
  prefetcher_options.measure_layout = true;
  prefetcher_options.spare_core = false;
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
  sampler.set_epoch(0);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
  const LayoutMeasurement layout = prefetcher.layout();
  REQUIRE(layout.decided);
  REQUIRE_FALSE(layout.spare_core);
  REQUIRE(layout.caller_thread == strider::pipeline_detail::keeps_caller_thread(
                                      layout.io_thread_us_per_step, layout.caller_thread_us_per_step, false));
}

TEST_CASE("a layout block counts the steps read while it ran, not those it delivered", "[prefetcher]") {
  using strider::pipeline_detail::steps_read_in_block;
  // w3 at 1 rank: an I/O-thread block of 128 steps that began with 48 ready and ended with 15 read
  // 95 of them; one that began and ended with none, or with as many, read as many as it delivered.
  REQUIRE(steps_read_in_block(128, 48, 15) == 95);
  REQUIRE(steps_read_in_block(128, 0, 0) == 128);
  REQUIRE(steps_read_in_block(128, 24, 24) == 128);
  REQUIRE(steps_read_in_block(64, 0, 3) == 67);  // a caller's block that read a group of steps at its end
  REQUIRE(steps_read_in_block(4, 10, 0) == 1);   // never none: a time per step stays finite
}

TEST_CASE("measuring the thread layout switches readers mid-epoch and changes no batch", "[prefetcher]") {
  // Blocks of 64 steps (twice a ring of 8, at least 64), three per layout, alternating: the caller's
  // blocks read on the consumer's thread, whatever is decided in the end.
  for (int held : {1, 2}) {
    CAPTURE(held);
    FakeReaderOptions options;
    options.samples = 1500;
    DistributedSampler sampler = make_sampler(options.samples, 1, 1, 0);  // 1500 steps
    const auto account = std::make_shared<strider::PrefetchAccount>();
    PrefetcherOptions prefetcher_options = observed(8, account);
    prefetcher_options.measure_layout = true;
    Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      sampler.set_epoch(epoch);
      const auto expected = direct_hashes(options, sampler);
      std::vector<std::uint64_t> seen;
      std::deque<Batch> kept;  // the consumer holds `held` batches at a time
      prefetcher.start_epoch(sampler);
      while (auto batch = prefetcher.next()) {
        seen.push_back(strider::testing::batch_hash(*batch));
        kept.push_back(std::move(*batch));
        if (static_cast<int>(kept.size()) >= held) kept.pop_front();
      }
      kept.clear();
      REQUIRE(seen == expected);
      if (epoch == 0) {
        const LayoutMeasurement layout = prefetcher.layout();
        REQUIRE(layout.decided);
        REQUIRE(layout.steps_measured == 3 * 64);
        REQUIRE(layout.io_thread_us_per_step > 0);
        REQUIRE(layout.caller_thread_us_per_step > 0);
        REQUIRE(account->figures().caller_thread_batches >= 3 * 64);
        REQUIRE(account->figures().caller_thread_batches <= 1500);
      }
    }
  }
}

TEST_CASE("epochs too short to time a layout block end the measurement on the I/O thread", "[prefetcher]") {
  // Epoch 0 (100 steps) times an I/O-thread block (8 steps settling, 64 timed); the caller's block is
  // then cut by the epoch's end, and epoch 1 (50 steps) is too short for one: the measurement ends
  // undecided, and epochs 2 and 3 read ahead on the I/O thread again.
  FakeReaderOptions options;
  options.samples = 100;
  DistributedSampler long_epochs = make_sampler(100, 1, 1, 0), short_epochs = make_sampler(50, 1, 1, 0);
  const auto account = std::make_shared<strider::PrefetchAccount>();
  PrefetcherOptions prefetcher_options = observed(8, account);
  prefetcher_options.measure_layout = true;
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
  std::int64_t caller_batches_before = 0;
  for (std::int64_t epoch = 0; epoch < 4; ++epoch) {
    DistributedSampler& sampler = epoch == 0 ? long_epochs : short_epochs;
    sampler.set_epoch(epoch);
    REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
    if (epoch == 1) {
      caller_batches_before = account->figures().caller_thread_batches;
      REQUIRE(caller_batches_before >= 50);  // epoch 1 was read on the caller's thread, its block cut
    }
  }
  REQUIRE_FALSE(prefetcher.layout().decided);
  REQUIRE(account->figures().caller_thread_batches == caller_batches_before);  // epochs 2, 3: the I/O thread
}

TEST_CASE("the agreed layout ends a measurement and sets where batches are read", "[prefetcher]") {
  // use_layout mid-measurement: the caller's thread from then on (every batch of the next epochs),
  // then the I/O thread again (none); the batches never change.
  FakeReaderOptions options;
  options.samples = 300;
  DistributedSampler sampler = make_sampler(300, 1, 1, 0);
  const auto account = std::make_shared<strider::PrefetchAccount>();
  PrefetcherOptions prefetcher_options = observed(8, account);
  prefetcher_options.measure_layout = true;
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), prefetcher_options);
  REQUIRE(prefetcher.layout().measuring);
  prefetcher.use_layout(true);
  REQUIRE_FALSE(prefetcher.layout().measuring);
  REQUIRE(prefetcher.layout().caller_thread);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    sampler.set_epoch(epoch);
    REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
  }
  REQUIRE(account->figures().caller_thread_batches == 600);
  prefetcher.use_layout(false);
  REQUIRE_FALSE(prefetcher.layout().caller_thread);
  sampler.set_epoch(2);
  REQUIRE(strider::testing::prefetched_batch_hashes(prefetcher, sampler) == direct_hashes(options, sampler));
  REQUIRE(account->figures().caller_thread_batches == 600);  // the I/O thread read epoch 2
}

namespace {

/// Runs `body` on a thread of its own; a body still running after `limit` (a lost wake-up: the
/// consumer or the I/O thread asleep for good) ends the test binary with a message rather than
/// hanging until ctest's timeout.
template <typename Body>
void within(std::chrono::seconds limit, const char* what, Body body) {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::thread runner([&] {
    body();
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    done_changed.notify_all();
  });
  std::unique_lock<std::mutex> lock(mutex);
  if (!done_changed.wait_for(lock, limit, [&] { return done; })) {
    std::fprintf(stderr, "%s: still running after %lld s: a lost wake-up\n", what,
                 static_cast<long long>(limit.count()));
    std::abort();
  }
  lock.unlock();
  runner.join();
}

}  // namespace

TEST_CASE("a slow reader and a slow consumer in turns: every wake-up arrives, batches as planned", "[prefetcher]") {
  // Runs of 40 steps: the reader sleeps 200 us per batch (the consumer finds the ring empty and
  // sleeps until the I/O thread wakes it), then the consumer sleeps 200 us per batch (the I/O thread
  // finds the ring full and sleeps until a buffer comes free). A wake-up lost on either side hangs.
  for (int depth : {3, 16}) {
    for (int held : {1, 2}) {
      CAPTURE(depth, held);
      FakeReaderOptions options;
      options.samples = 400;
      options.delay = std::chrono::microseconds(200);
      options.delay_phase_reads = 40;
      DistributedSampler sampler = make_sampler(options.samples, 1, 1, 0);  // 400 steps
      const auto expected = direct_hashes(options, sampler);
      const auto account = std::make_shared<strider::PrefetchAccount>();
      Prefetcher prefetcher(std::make_unique<FakeReader>(options), observed(depth, account));
      std::vector<std::uint64_t> seen;
      within(std::chrono::seconds(60), "slow reader / slow consumer", [&] {
        std::deque<Batch> kept;
        prefetcher.start_epoch(sampler);
        while (auto batch = prefetcher.next()) {
          if (batch->step() / 40 % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
          seen.push_back(strider::testing::batch_hash(*batch));
          kept.push_back(std::move(*batch));
          if (static_cast<int>(kept.size()) >= held) kept.pop_front();
        }
      });
      REQUIRE(seen == expected);
      const strider::PrefetchAccountFigures figures = account->figures();
      REQUIRE(figures.consumer_sleeps >= 1);  // the consumer waited for the slow reader
      REQUIRE(figures.io_wakeups >= 1);       // the I/O thread waited for the slow consumer
      REQUIRE(figures.io_idle_seconds > 0);
    }
  }
}

TEST_CASE("an I/O thread with nothing left to read is not woken when buffers come free", "[prefetcher]") {
  // A fast reader and a slow consumer with a ring of 16: the I/O thread keeps the ring full and is
  // woken once a quarter of it (4 buffers) is free: about (steps - 16) / 4 times an epoch. Once the
  // epoch is all read, the last 16 buffers coming free must not wake it: it would only sleep again
  // (two context switches for nothing; 13 an epoch here).
  FakeReaderOptions options;
  options.samples = 100;
  DistributedSampler sampler = make_sampler(options.samples, 1, 1, 0);  // 100 steps
  const auto account = std::make_shared<strider::PrefetchAccount>();
  Prefetcher prefetcher(std::make_unique<FakeReader>(options), observed(16, account));
  std::int64_t steps = 0;
  within(std::chrono::seconds(60), "slow consumer", [&] {
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      sampler.set_epoch(epoch);
      prefetcher.start_epoch(sampler);
      while (auto batch = prefetcher.next()) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        ++steps;
      }
    }
  });
  REQUIRE(steps == 200);
  const strider::PrefetchAccountFigures figures = account->figures();
  // Per epoch: two at its start (stop, start), then one per 4 buffers freed while steps remain to
  // read ((100 - 16) / 4), and a few to spare.
  CAPTURE(figures.io_wakeups);
  REQUIRE(figures.io_wakeups >= 2 * (100 - 16) / 8);
  REQUIRE(figures.io_wakeups <= 2 * (2 + (100 - 16) / 4 + 5));
}
