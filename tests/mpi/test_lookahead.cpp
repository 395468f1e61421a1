// --lookahead L at 1..4 ranks: the batches are those read batch by batch, for every sampler, with
// the I/O thread or without, and when resumed mid-epoch; on compressed, chunked data each chunk is
// read once per window of L steps rather than once per batch (counted from the delivered plan).
// Every check is agreed across ranks before it is asserted.
#include <set>

#include "loader_test_support.hpp"

using namespace strider;
using namespace strider::testing;

namespace {

constexpr std::int64_t kChunkRows = 16;

/// Distinct chunks of kChunkRows rows among the rows of each group of `group` consecutive batches
/// (1: per batch), summed: what a reader of whole chunks reads, in chunks.
std::int64_t chunks_read(const std::vector<std::vector<std::int64_t>>& batches, std::size_t group) {
  std::int64_t total = 0;
  for (std::size_t first = 0; first < batches.size(); first += group) {
    std::set<std::int64_t> chunks;
    for (std::size_t k = first; k < std::min(batches.size(), first + group); ++k)
      for (std::int64_t row : batches[k]) chunks.insert(row / kChunkRows);
    total += static_cast<std::int64_t>(chunks.size());
  }
  return total;
}

}  // namespace

TEST_CASE("lookahead: the same batches for every sampler, thread layout and resume", "[mpi][lookahead][pipeline]") {
  const Communicator& comm = world();
  const FileLayout compressed{"chunked", kChunkRows, 4};
  const TestFile features(comm, "features", 203, "_deflate", compressed),
      sequences(comm, "sequences", 301, "_deflate", FileLayout{"chunked", 64, 4});
  int mismatches = 0;
  for (const ModeCase& mode : every_mode()) {
    LoaderOptions options = options_for(mode, features, sequences);
    options.reader.engine = "hdf5";
    const std::vector<std::uint64_t> expected = expected_hashes(comm, options, 1);
    for (std::int64_t lookahead : {1, 3, 1000}) {
      for (bool io_thread : {true, false}) {
        options.lookahead = lookahead;
        options.io_thread = io_thread;
        Loader loader(comm, options);
        if (loader_hashes(loader, 1) != expected) {
          ++mismatches;
          UNSCOPED_INFO("mismatch: " << mode.kind << " " << mode.mode << ", lookahead " << lookahead
                                     << (io_thread ? "" : ", caller thread"));
        }
      }
    }
    // Resumed mid-epoch: windows start at the resumed step.
    options.lookahead = 3;
    const auto k = static_cast<std::int64_t>(expected.size() / 2);
    Loader resumed(comm, options);
    resumed.resume(state_after_leaving(comm, options, 1, k));
    if (loader_hashes(resumed, 1) != std::vector<std::uint64_t>(expected.begin() + k, expected.end())) {
      ++mismatches;
      UNSCOPED_INFO("resume mismatch: " << mode.kind << " " << mode.mode);
    }
  }
  REQUIRE(comm.all_reduce(mismatches, ReduceOp::sum) == 0);
}

TEST_CASE("lookahead: a chunk is read once per window of steps, not once per batch", "[mpi][lookahead][pipeline]") {
  const Communicator& comm = world();
  const TestFile features(comm, "features", 203, "_deflate", FileLayout{"chunked", kChunkRows, 4});
  LoaderOptions options = options_for(features.path(), "distributed", 5);
  options.reader.engine = "hdf5";
  constexpr std::int64_t window = 4;
  std::int64_t bytes[2] = {0, 0}, chunks[2] = {0, 0};  // without, with lookahead
  std::vector<std::vector<std::int64_t>> batches;
  for (int with : {0, 1}) {
    options.lookahead = with ? window : 0;
    Loader loader(comm, options);
    batches.clear();
    for (Batch batch : loader.epoch(0)) batches.push_back(batch.indices());
    bytes[with] = loader.stats().bytes_read;
    chunks[with] = loader.stats().read_calls;
  }
  // The engine inflates these chunks itself, one read call per chunk: each chunk a read needs once,
  // except the chunk the previous read inflated in part, which it keeps. So a read of a batch (or a
  // window) costs its distinct chunks, or one fewer.
  const auto steps = static_cast<std::int64_t>(batches.size()), windows = (steps + window - 1) / window;
  const std::int64_t per_batch = chunks_read(batches, 1), per_window = chunks_read(batches, window);
  const auto between = [](std::int64_t got, std::int64_t most, std::int64_t reads) {
    return got <= most && got >= most - reads;
  };
  const bool ok = per_window < per_batch && between(chunks[0], per_batch, steps) &&
                  between(chunks[1], per_window, windows) && chunks[1] < chunks[0] && 0 < bytes[1] &&
                  bytes[1] < bytes[0];
  if (!ok)
    UNSCOPED_INFO("bytes " << bytes[0] << " -> " << bytes[1] << ", chunks read " << chunks[0] << " -> " << chunks[1]
                           << ", distinct per batch " << per_batch << ", per window " << per_window);
  REQUIRE(everywhere(comm, ok));
}
