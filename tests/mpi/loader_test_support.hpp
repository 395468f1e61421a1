#pragma once
// Shared by the MPI tests of the Loader and the in-memory store: small dataset files written per
// test case, Loader options with an explicit seed, the batches a hand-wired reader and sampler give
// (the reference), and helpers that agree on a check across ranks before it is asserted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "batch_hashes.hpp"
#include "mpi_test_support.hpp"
#include "scoped_variable.hpp"
#include "strider/io/synthetic_dataset.hpp"
#include "strider/pipeline/loader.hpp"

namespace strider::testing {

/// How a TestFile stores its samples (or tokens).
struct FileLayout {
  std::string layout = "contiguous";  ///< contiguous | chunked
  std::int64_t chunk_rows = 0;        ///< chunked: rows (sequences: tokens) per chunk; 0: the default
  int compression = 0;                ///< deflate level (> 0: chunked)
  std::int64_t dim = 6;               ///< features: float32 per row (16: 64-byte rows, a size with a specialised copy)
};

/// A dataset file written for one test case, removed at the end of it (collective).
class TestFile {
 public:
  TestFile(const Communicator& comm, const std::string& kind, std::int64_t samples, const std::string& name = "",
           const FileLayout& layout = {})
      : comm_(comm) {
    // A name of its own where a test leaves a file open (an HDF5 file open in this process cannot
    // be written again).
    path_ = comm.is_root() ? "/tmp/strider_loader_" + std::to_string(getpid()) + "_" + kind + name + ".h5" : "";
    comm.broadcast(path_);
    SyntheticOptions options;
    options.kind = kind;
    options.samples = samples;
    options.classes = 3;
    options.imbalance = 4;
    options.dim = layout.dim;
    options.min_length = 1;
    options.max_length = 60;
    options.median_length = 12;
    options.seed = 11;
    options.progress = false;
    options.layout = layout.layout;
    options.chunk_rows = layout.chunk_rows;
    options.compression = layout.compression;
    write_synthetic_dataset(comm, path_, options);
  }
  ~TestFile() {
    comm_.barrier();
    if (comm_.is_root()) std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  const Communicator& comm_;
  std::string path_;
};

/// Loader options for `path` with an explicit seed.
inline LoaderOptions options_for(const std::string& path, const std::string& mode, std::int64_t batch_size) {
  LoaderOptions options;
  options.data_path = path;
  options.sampler.mode = mode;
  options.sampler.batch_size = batch_size;
  options.sampler.block_size = 5;
  options.sampler.max_tokens = 100;
  options.sampler.megabatch = 1;  // bucketed: small sort windows, so epochs differ in length
  options.seed = 1234;
  return options;
}

/// The hand-wired pipeline: a reader (hdf5 engine, labels held) and a sampler built from the same
/// options by hand; batch hashes of every step of `epoch`, read directly.
inline std::vector<std::uint64_t> expected_hashes(const Communicator& comm, const LoaderOptions& loading,
                                                  std::int64_t epoch, std::uint64_t* config_hash = nullptr) {
  ReaderOptions reader_options = loading.reader;
  reader_options.engine = "hdf5";
  std::unique_ptr<BatchReader> reader = open_reader(comm, loading.data_path, reader_options);
  SamplerOptions sampling = loading.sampler;
  sampling.seed = *loading.seed;
  sampling.dataset_size = reader->info().num_samples;
  sampling.labels = std::make_shared<const std::vector<std::int32_t>>(reader->labels().to_vector());
  if (reader->info().variable_length)
    sampling.lengths = std::make_shared<const std::vector<std::int64_t>>(reader->lengths().to_vector());
  std::unique_ptr<Sampler> sampler = make_sampler(sampling, comm.size(), comm.rank());
  sampler->set_epoch(epoch);
  if (config_hash != nullptr) *config_hash = sampler->config_hash();
  return strider::testing::direct_batch_hashes(*reader, *sampler);
}

/// Batch hashes of what one epoch of the loader delivers.
inline std::vector<std::uint64_t> loader_hashes(Loader& loader, std::int64_t epoch) {
  std::vector<std::uint64_t> hashes;
  for (Batch batch : loader.epoch(epoch)) hashes.push_back(strider::testing::batch_hash(batch));
  return hashes;
}

/// Collective: the state a Loader with `options` saves when the caller leaves epoch `epoch` after
/// `steps` batches.
inline SamplerState state_after_leaving(const Communicator& comm, const LoaderOptions& options, std::int64_t epoch,
                                        std::int64_t steps) {
  Loader loader(comm, options);
  for (Batch batch : loader.epoch(epoch))
    if (batch.step() + 1 == steps) break;
  return loader.state();
}

/// An order-free fingerprint of a set of indices: equal sets, equal sums (summed over ranks, the
/// fingerprint of the union of their batches).
inline std::uint64_t index_fingerprint(const std::vector<std::int64_t>& indices) {
  std::uint64_t sum = 0;
  for (std::int64_t index : indices) {
    std::uint64_t x = static_cast<std::uint64_t>(index) + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    sum += x ^ (x >> 31);
  }
  return sum;
}

/// Whether body throws a UsageError (not collective).
inline bool refuses(const std::function<void()>& body) {
  try {
    body();
  } catch (const UsageError&) {
    return true;
  }
  return false;
}

/// Collective: true on every rank when `ok` holds on every rank.
inline bool everywhere(const Communicator& comm, bool ok) {
  return comm.all_reduce(ok ? 1 : 0, ReduceOp::min) == 1;
}

/// Collective: the number of ranks on which `body` threw an AgreedError whose message holds `words`.
inline int ranks_agreeing(const Communicator& comm, const std::function<void()>& body, const std::string& words) {
  int agreed = 0;
  try {
    body();
  } catch (const AgreedError& error) {
    agreed = std::string(error.what()).find(words) != std::string::npos ? 1 : 0;
    if (!agreed) UNSCOPED_INFO("unexpected message: " << error.what());
  }
  return comm.all_reduce(agreed, ReduceOp::sum);
}

struct ModeCase {
  std::string kind;  // the file: features or sequences
  std::string mode;
  std::int64_t batch_size;
};

/// Collective: rank 0 moves the file's modification time back 10 s (the same bytes): a file that
/// changed, as the Loader's check sees it.
inline void touch_back(const Communicator& comm, const std::string& path) {
  comm.barrier();
  if (comm.is_root()) {
    struct stat status {};
    ::stat(path.c_str(), &status);
    const timespec times[2] = {status.st_atim, {status.st_mtim.tv_sec - 10, status.st_mtim.tv_nsec}};
    ::utimensat(AT_FDCWD, path.c_str(), times, 0);
  }
  comm.barrier();
}

/// options_for the file of the case's kind.
inline LoaderOptions options_for(const ModeCase& mode, const TestFile& features, const TestFile& sequences) {
  return options_for((mode.kind == "features" ? features : sequences).path(), mode.mode, mode.batch_size);
}

inline const std::vector<ModeCase>& every_mode() {
  static const std::vector<ModeCase> cases = {{"features", "distributed", 7}, {"features", "streaming", 7},
                                              {"features", "block", 7},       {"features", "balanced", 6},
                                              {"features", "weighted", 6},    {"features", "stratified", 6},
                                              {"sequences", "bucketed", 0},   {"sequences", "distributed", 5}};
  return cases;
}

/// Sets STRIDER_NODE_SIZE on this rank for the object's lifetime (0: unset: the real nodes), and
/// restores what the environment held before (a run of the tests with it set must still pass).
class NodeSize {
 public:
  explicit NodeSize(int ranks_per_node)
      : value_(std::to_string(ranks_per_node)),
        variable_("STRIDER_NODE_SIZE", ranks_per_node > 0 ? value_.c_str() : nullptr) {}

 private:
  std::string value_;  // before variable_: set before it is read
  ScopedVariable variable_;
};

/// The node sizes a run at `ranks` ranks can use (each divides the ranks of the one real node),
/// 0 (the real split) included: one node of all ranks.
inline std::vector<int> node_sizes(int ranks) {
  std::vector<int> sizes = {0};
  for (int size : {1, 2, 4})
    if (ranks % size == 0 && size < ranks) sizes.push_back(size);
  return sizes;
}

}  // namespace strider::testing
