// The whole pipeline on a real file at 1..4 ranks: sampler -> reader (every engine, several copy
// threads) -> prefetcher (every depth) gives the same bytes as direct reads of the same plan.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "batch_hashes.hpp"
#include "mpi_test_support.hpp"
#include "pipeline/thread_layout.hpp"
#include "strider/core/hash.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/sampling/distributed_sampler.hpp"

using namespace strider;
using strider::testing::world;

namespace {

std::string shared_path(const Communicator& comm, const std::string& name) {
  std::string path = comm.is_root() ? "/tmp/strider_pipeline_" + std::to_string(getpid()) + "_" + name + ".h5" : "";
  comm.broadcast(path);
  return path;
}

}  // namespace

TEST_CASE("pipeline: identical bytes for every engine, depth and copy-thread count", "[mpi][pipeline]") {
  const Communicator& comm = world();
  for (const std::string kind : {"features", "sequences"}) {
    SyntheticOptions options;
    options.kind = kind;
    options.samples = 777;
    options.classes = 3;
    options.dim = 8;
    options.min_length = 1;
    options.max_length = 40;
    options.median_length = 8;
    options.seed = 5;
    options.progress = false;
    const std::string path = shared_path(comm, kind);
    write_synthetic_dataset(comm, path, options);

    DistributedSamplerConfig config;
    config.dataset_size = 777;
    config.batch_size = 13;
    config.seed = 3;
    DistributedSampler sampler(config, comm.size(), comm.rank());
    sampler.set_epoch(2);

    ReaderOptions reader_options;
    reader_options.engine = "hdf5";
    auto oracle = open_reader(comm, path, reader_options);
    const std::vector<std::uint64_t> expected = strider::testing::direct_batch_hashes(*oracle, sampler);

    const std::vector<std::string> engines = {"hdf5", "direct", "mmap", "auto"};
    int mismatches = 0;
    for (const std::string& engine : engines) {
      for (int threads : {1, 3}) {
        for (int depth : {1, 3, 8}) {
          reader_options.engine = engine;
          reader_options.copy_threads = threads;
          Prefetcher prefetcher(open_reader(comm, path, reader_options), PrefetcherOptions{depth, nullptr});
          if (strider::testing::prefetched_batch_hashes(prefetcher, sampler) != expected) {
            ++mismatches;
            UNSCOPED_INFO("mismatch: " << kind << " engine " << engine << " threads " << threads << " depth " << depth);
          }
        }
      }
    }
    // Agree before asserting, so that every rank reaches the same collectives.
    const int total_mismatches = comm.all_reduce(mismatches, ReduceOp::sum);
    comm.barrier();
    if (comm.is_root()) std::remove(path.c_str());
    REQUIRE(total_mismatches == 0);
  }
}

TEST_CASE("pipeline: the mmap engine's specialised row sizes give the hdf5 engine's bytes and labels",
          "[mpi][pipeline]") {
  // The mmap engine copies rows of 64, 128, 256 and 512 bytes (one file) with the size a constant,
  // labels stored as int32 in the same pass; 96-byte rows take the general path. Every size, with
  // labels held, read per batch (mapped) and absent, one and three copy threads, and batches of
  // 13 rows and of 1100 (over 256 KiB at 512 bytes: split between the copy threads).
  const Communicator& comm = world();
  int mismatches = 0;
  for (const std::int64_t dim : {16, 32, 64, 128, 24}) {
    SyntheticOptions options;
    options.samples = 4500;
    options.classes = 7;
    options.dim = dim;
    options.seed = 9;
    options.progress = false;
    const std::string path = shared_path(comm, "rows" + std::to_string(dim));
    write_synthetic_dataset(comm, path, options);
    for (const std::string labels : {"held", "per batch", "none"}) {
      ReaderOptions reader_options;
      reader_options.labels_in_memory = labels == "held";
      if (labels == "none") reader_options.keys.labels = std::string(kNoLabelsKey);
      for (const std::int64_t batch : {13, 1100}) {
        DistributedSamplerConfig config;
        config.dataset_size = options.samples;
        config.batch_size = batch;
        config.seed = 4;
        DistributedSampler sampler(config, comm.size(), comm.rank());
        sampler.set_epoch(1);
        reader_options.engine = "hdf5";
        reader_options.copy_threads = 1;
        auto oracle = open_reader(comm, path, reader_options);
        const std::vector<std::uint64_t> expected = strider::testing::direct_batch_hashes(*oracle, sampler);
        for (int threads : {1, 3}) {
          reader_options.engine = "mmap";
          reader_options.copy_threads = threads;
          auto reader = open_reader(comm, path, reader_options);
          const DatasetInfo& info = reader->info();
          if (labels == "none" ? info.has_labels
                               : !info.has_labels || info.labels_per_batch != (labels == "per batch")) {
            ++mismatches;
            UNSCOPED_INFO("labels not " << labels << " with " << dim * 4 << "-byte rows");
          }
          Prefetcher prefetcher(std::move(reader), PrefetcherOptions{3, nullptr});
          if (strider::testing::prefetched_batch_hashes(prefetcher, sampler) != expected) {
            ++mismatches;
            UNSCOPED_INFO("mismatch: " << dim * 4 << "-byte rows, labels " << labels << ", batch " << batch
                                       << ", threads " << threads);
          }
        }
      }
    }
    comm.barrier();
    if (comm.is_root()) std::remove(path.c_str());
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

TEST_CASE("pipeline: the ranks agree on one thread layout, by each layout's slowest rank", "[mpi][pipeline]") {
  const Communicator& comm = world();
  const auto measured = [](double io_us, double caller_us) {
    LayoutMeasurement layout;
    layout.decided = true;
    layout.caller_thread = caller_us < io_us;  // what this rank alone would keep
    layout.io_thread_us_per_step = io_us;
    layout.caller_thread_us_per_step = caller_us;
    return layout;
  };
  // Rank 0 alone finds its consumer's thread faster (10 against 30 us); every other rank finds the
  // I/O thread faster (20 against 40). Slowest: 30 with the I/O thread, 40 on the consumer's: every
  // rank reads ahead on the I/O thread (one rank alone keeps its own choice).
  const pipeline_detail::AgreedLayout mixed =
      pipeline_detail::agree_thread_layout(comm, comm.is_root() ? measured(30, 10) : measured(20, 40));
  REQUIRE_ON_ALL_RANKS(mixed.caller_thread == (comm.size() == 1));
  REQUIRE_ON_ALL_RANKS(mixed.io_thread_us_per_step == 30.0);
  REQUIRE_ON_ALL_RANKS(mixed.caller_thread_us_per_step == (comm.size() == 1 ? 10.0 : 40.0));
  // Every rank faster on its consumer's thread, the slowest too (50 against 40 + rank, the suite's
  // at most 4 ranks): the consumer's.
  const pipeline_detail::AgreedLayout caller =
      pipeline_detail::agree_thread_layout(comm, measured(50, 40 + comm.rank()));
  REQUIRE_ON_ALL_RANKS(caller.caller_thread);
  REQUIRE_ON_ALL_RANKS(caller.caller_thread_us_per_step == 40.0 + comm.size() - 1);
  // Within the margin (96 against 100 us) the I/O thread stays.
  const pipeline_detail::AgreedLayout tie = pipeline_detail::agree_thread_layout(comm, measured(100, 96));
  REQUIRE_ON_ALL_RANKS(!tie.caller_thread);
  REQUIRE_ON_ALL_RANKS(tie.spare_core);
  // One rank (the last) without a core to spare: every rank takes the other tie rule, and the same
  // tie (the I/O thread 4% faster now) goes to the consumer's thread; a clear lead (20%) does not.
  const auto spare_but_last = [&](LayoutMeasurement layout) {
    layout.spare_core = comm.rank() != comm.size() - 1;
    return layout;
  };
  const pipeline_detail::AgreedLayout no_spare =
      pipeline_detail::agree_thread_layout(comm, spare_but_last(measured(96, 100)));
  REQUIRE_ON_ALL_RANKS(!no_spare.spare_core);
  REQUIRE_ON_ALL_RANKS(no_spare.caller_thread);
  REQUIRE_ON_ALL_RANKS(!pipeline_detail::agree_thread_layout(comm, spare_but_last(measured(80, 100))).caller_thread);
}
