// gather_limit: the memory-gather limit for shuffled rows. Copies the rows of shuffled epochs,
// batch by batch, into one batch buffer straight out of the page-cached file mapped into memory
// (no sampler, no reader, no threads): what any loader of this file on this machine can at best do
// per core, and, with --processes R, what R such loaders running at once reach together (the limit
// for R ranks on one node: one core's limit times R overstates it when they share memory
// bandwidth or caches, and understates nothing).
//
//   g++ -O2 -std=c++17 -o gather_limit gather_limit.cpp
//   gather_limit --file F --data-offset BYTES --row-bytes B --rows N --batch K [--seconds S] [--processes R]
//   gather_limit --file F --data-offset BYTES --element-bytes E --rows N --batch K --offsets-at BYTES ...
//        variable-length rows: int64 offsets[N+1] at byte --offsets-at; row i is elements
//        [offsets[i], offsets[i+1]) of the data
//   ... --labels-at BYTES [--label-bytes 4]: also copy each row's label (stored at BYTES, one per
//        row) into a label buffer in the same pass, as a loader that delivers labels must
//
// How a row is found matters as much as the copy: a fixed-size row's address is computed
// (data + row * B), a variable-length row's from offsets[row] and offsets[row + 1], which share a
// cache line; a table per row indexed by the shuffled row would add cache misses the real gather
// does not have. Nor is a row's size looked up per row where strider's mmap engine knows it: rows
// of 64, 128, 256 or 512 bytes (and 4-byte labels) are copied with the size a constant, as that
// engine copies them (a memcpy call per row would understate the limit). Three loops are timed,
// each on fresh shuffled epochs: plain (memcpy per row) and two prefetching ones (the first KiB of
// the row 8 positions ahead requested while this one is copied, as the mmap engine does), one
// asking for the lines in every cache level (prefetcht0, the mmap engine's) and one non-temporal
// (prefetchnta, which on some processors keeps the lines out of the outer caches); the limit is the
// fastest.
//
// Prints one JSON object: rows_per_s (the sum over processes), rows_per_cpu_s (rows per CPU-second
// of user + system time, the figure that holds on a loaded machine), bytes_per_s, the rates of the
// loops, and each process's figures. The shuffle is not timed (the sampler's share).

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string file;
  std::int64_t data_offset = -1, row_bytes = 0, element_bytes = 0, rows = 0, batch = 0, offsets_at = -1;
  std::int64_t labels_at = -1, label_bytes = 4;
  double seconds = 1.0;
  int processes = 1;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "gather_limit: %s\nusage: gather_limit --file F --data-offset BYTES (--row-bytes B | --element-bytes E "
               "--offsets-at BYTES) --rows N --batch K [--seconds S] [--processes R]\n",
               problem);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (i + 1 >= argc) usage(("no value after " + name).c_str());
    const char* value = argv[++i];
    if (name == "--file")
      options.file = value;
    else if (name == "--data-offset")
      options.data_offset = std::atoll(value);
    else if (name == "--row-bytes")
      options.row_bytes = std::atoll(value);
    else if (name == "--element-bytes")
      options.element_bytes = std::atoll(value);
    else if (name == "--rows")
      options.rows = std::atoll(value);
    else if (name == "--batch")
      options.batch = std::atoll(value);
    else if (name == "--offsets-at")
      options.offsets_at = std::atoll(value);
    else if (name == "--labels-at")
      options.labels_at = std::atoll(value);
    else if (name == "--label-bytes")
      options.label_bytes = std::atoll(value);
    else if (name == "--seconds")
      options.seconds = std::atof(value);
    else if (name == "--processes")
      options.processes = std::atoi(value);
    else
      usage(("unknown option " + name).c_str());
  }
  if (options.file.empty() || options.data_offset < 0 || options.rows < 1 || options.batch < 1)
    usage("--file, --data-offset, --rows and --batch are required");
  if ((options.row_bytes > 0) == (options.offsets_at >= 0)) usage("give either --row-bytes or --offsets-at");
  if (options.offsets_at >= 0 && options.element_bytes < 1) usage("--offsets-at needs --element-bytes");
  if (options.processes < 1 || options.seconds <= 0) usage("--processes and --seconds must be positive");
  if (options.label_bytes < 1 || options.label_bytes > 8) usage("--label-bytes must be in 1..8");
  return options;
}

double cpu_seconds() {
  rusage usage_now{};
  ::getrusage(RUSAGE_SELF, &usage_now);
  return static_cast<double>(usage_now.ru_utime.tv_sec + usage_now.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage_now.ru_utime.tv_usec + usage_now.ru_stime.tv_usec);
}

/// One process's result.
struct Figures {
  double plain_rows_per_s = 0, prefetch_t0_rows_per_s = 0, prefetch_nta_rows_per_s = 0;  // wall-clock, each loop alone
  double rows = 0, bytes = 0, seconds = 0, cpu_seconds = 0;                              // the fastest loop's totals
};

/// Where row i lies: fixed-size rows by arithmetic, variable-length rows by their offsets; and its
/// label, when labels are copied too.
class Rows {
 public:
  Rows(const std::byte* data, std::int64_t row_bytes, const std::int64_t* offsets, std::int64_t element_bytes,
       const std::byte* labels, std::int64_t label_bytes)
      : data_(data),
        row_bytes_(row_bytes),
        offsets_(offsets),
        element_bytes_(element_bytes),
        labels_(labels),
        label_bytes_(label_bytes) {}
  const std::byte* at(std::int64_t row) const {
    return offsets_ == nullptr ? data_ + row * row_bytes_ : data_ + offsets_[row] * element_bytes_;
  }
  std::int64_t bytes(std::int64_t row) const {
    return offsets_ == nullptr ? row_bytes_ : (offsets_[row + 1] - offsets_[row]) * element_bytes_;
  }
  /// Bytes of every row when they are fixed-size, else 0.
  std::int64_t fixed_row_bytes() const { return offsets_ == nullptr ? row_bytes_ : 0; }
  bool has_labels() const { return labels_ != nullptr; }
  const std::byte* label(std::int64_t row) const { return labels_ + row * label_bytes_; }
  std::int64_t label_bytes() const { return label_bytes_; }

 private:
  const std::byte* data_;
  std::int64_t row_bytes_;
  const std::int64_t* offsets_;
  std::int64_t element_bytes_;
  const std::byte* labels_;
  std::int64_t label_bytes_;
};

constexpr std::int64_t kRowsAhead = 8;

/// The loops: no prefetch, prefetcht0 (every cache level) or prefetchnta (non-temporal).
enum Prefetch { kPlain, kPrefetchT0, kPrefetchNta };

/// Copies one epoch in `order`, batch by batch, into `buffer` (and the labels into `labels`);
/// returns the bytes of rows copied. kRowBytes and kLabelBytes, when not 0, are the rows' and the
/// labels' sizes as constants: the compiler then inlines each memcpy as a few moves, as strider's
/// mmap engine does for the common row sizes (a limit that paid a memcpy call per row would
/// understate what a loader can do).
template <Prefetch kPrefetch, std::int64_t kRowBytes, std::int64_t kLabelBytes>
std::int64_t gather_epoch(const Rows& rows, const std::vector<std::int64_t>& order, std::int64_t batch,
                          std::byte* buffer, std::byte* labels, volatile std::uint64_t& sink) {
  const auto count = static_cast<std::int64_t>(order.size());
  const auto row_bytes = [&](std::int64_t row) { return kRowBytes > 0 ? kRowBytes : rows.bytes(row); };
  const std::int64_t label_bytes = kLabelBytes > 0 ? kLabelBytes : rows.label_bytes();
  std::int64_t copied = 0;
  for (std::int64_t first = 0; first < count; first += batch) {
    const std::int64_t last = std::min(count, first + batch);
    std::byte* out = buffer;
    for (std::int64_t k = first; k < last; ++k) {
      if constexpr (kPrefetch != kPlain) {
        if (k + kRowsAhead < count) {
          const std::int64_t ahead = order[k + kRowsAhead];
          const std::byte* at = rows.at(ahead);
          const std::int64_t bytes = std::min<std::int64_t>(row_bytes(ahead), 1024);
          constexpr int kLocality = kPrefetch == kPrefetchT0 ? 3 : 0;
          for (std::int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(at + line, 0, kLocality);
          if (rows.has_labels()) __builtin_prefetch(rows.label(ahead), 0, kLocality);
        }
      }
      const std::int64_t row = order[k];
      const std::int64_t bytes = row_bytes(row);
      std::memcpy(out, rows.at(row), static_cast<std::size_t>(bytes));
      out += bytes;
      if (rows.has_labels())
        std::memcpy(labels + (k - first) * label_bytes, rows.label(row), static_cast<std::size_t>(label_bytes));
    }
    copied += out - buffer;
    sink = sink + static_cast<std::uint64_t>(buffer[0]);
  }
  return copied;
}

/// gather_epoch with the rows' size a constant where it is one of strider's specialised sizes
/// (fixed-size rows of 64, 128, 256 or 512 bytes) and 4-byte labels a constant.
template <Prefetch kPrefetch, std::int64_t kLabelBytes>
std::int64_t gather_epoch_sized(const Rows& rows, std::int64_t fixed_row_bytes, const std::vector<std::int64_t>& order,
                                std::int64_t batch, std::byte* buffer, std::byte* labels,
                                volatile std::uint64_t& sink) {
  switch (fixed_row_bytes) {
    case 64:
      return gather_epoch<kPrefetch, 64, kLabelBytes>(rows, order, batch, buffer, labels, sink);
    case 128:
      return gather_epoch<kPrefetch, 128, kLabelBytes>(rows, order, batch, buffer, labels, sink);
    case 256:
      return gather_epoch<kPrefetch, 256, kLabelBytes>(rows, order, batch, buffer, labels, sink);
    case 512:
      return gather_epoch<kPrefetch, 512, kLabelBytes>(rows, order, batch, buffer, labels, sink);
    default:
      return gather_epoch<kPrefetch, 0, kLabelBytes>(rows, order, batch, buffer, labels, sink);
  }
}

/// Whole shuffled epochs until `seconds` of copying have passed (at least one epoch).
template <Prefetch kPrefetch>
Figures run_loop(const Rows& rows, std::int64_t count, std::int64_t batch, double seconds, std::uint64_t seed,
                 std::byte* buffer, std::byte* labels, volatile std::uint64_t& sink) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(seed);
  Figures figures;
  while (figures.seconds < seconds) {
    std::shuffle(order.begin(), order.end(), random);  // not timed: the sampler's share
    const double cpu_start = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    figures.bytes += static_cast<double>(
        rows.label_bytes() == 4
            ? gather_epoch_sized<kPrefetch, 4>(rows, rows.fixed_row_bytes(), order, batch, buffer, labels, sink)
            : gather_epoch_sized<kPrefetch, 0>(rows, rows.fixed_row_bytes(), order, batch, buffer, labels, sink));
    figures.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    figures.cpu_seconds += cpu_seconds() - cpu_start;
    figures.rows += static_cast<double>(count);
  }
  return figures;
}

/// One process: the three loops, alternating, each for a third of `seconds`; the fastest one's totals.
Figures measure(const Options& options, const Rows& rows, std::int64_t seed) {
  std::int64_t longest = 0;
  for (std::int64_t row = 0; row < options.rows; ++row) longest = std::max(longest, rows.bytes(row));
  std::vector<std::byte> buffer(static_cast<std::size_t>(std::max<std::int64_t>(1, options.batch * longest)));
  std::vector<std::byte> labels(static_cast<std::size_t>(options.batch * options.label_bytes));
  volatile std::uint64_t sink = 0;
  for (std::int64_t row = 0; row < options.rows; ++row)  // touch every row once (TLB and page tables)
    if (rows.bytes(row) > 0) sink = sink + static_cast<std::uint64_t>(*rows.at(row));
  Figures plain, prefetch, prefetch_nta;
  const double part_seconds = options.seconds / 6;
  for (int round = 0; round < 2; ++round) {  // alternate, so that a disturbance hits all alike
    const std::int64_t round_seed = seed + 3 * round;
    const Figures a = run_loop<kPlain>(rows, options.rows, options.batch, part_seconds, round_seed, buffer.data(),
                                       labels.data(), sink);
    const Figures b = run_loop<kPrefetchT0>(rows, options.rows, options.batch, part_seconds, round_seed + 1,
                                            buffer.data(), labels.data(), sink);
    const Figures c = run_loop<kPrefetchNta>(rows, options.rows, options.batch, part_seconds, round_seed + 2,
                                             buffer.data(), labels.data(), sink);
    for (auto [total, part] : {std::pair{&plain, &a}, std::pair{&prefetch, &b}, std::pair{&prefetch_nta, &c}}) {
      total->rows += part->rows;
      total->bytes += part->bytes;
      total->seconds += part->seconds;
      total->cpu_seconds += part->cpu_seconds;
    }
  }
  const auto rate = [](const Figures& figures) { return figures.rows / figures.seconds; };
  Figures best = plain;
  for (const Figures* loop : {&prefetch, &prefetch_nta})
    if (rate(*loop) > rate(best)) best = *loop;
  best.plain_rows_per_s = rate(plain);
  best.prefetch_t0_rows_per_s = rate(prefetch);
  best.prefetch_nta_rows_per_s = rate(prefetch_nta);
  return best;
}

void write_exactly(int descriptor, const void* bytes, std::size_t size) {
  const auto* at = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t done = ::write(descriptor, at, size);
    if (done <= 0) std::_Exit(1);
    at += done;
    size -= static_cast<std::size_t>(done);
  }
}

bool read_exactly(int descriptor, void* bytes, std::size_t size) {
  auto* at = static_cast<char*>(bytes);
  while (size > 0) {
    const ssize_t done = ::read(descriptor, at, size);
    if (done <= 0) return false;
    at += done;
    size -= static_cast<std::size_t>(done);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const int descriptor = ::open(options.file.c_str(), O_RDONLY);
  if (descriptor < 0) {
    std::perror(options.file.c_str());
    return 1;
  }
  struct stat info {};
  ::fstat(descriptor, &info);
  const auto size = static_cast<std::size_t>(info.st_size);
  auto* base =
      static_cast<const std::byte*>(::mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, descriptor, 0));
  if (base == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  const bool variable = options.offsets_at >= 0;
  const std::int64_t data_end =
      variable ? options.offsets_at + 8 * (options.rows + 1) : options.data_offset + options.rows * options.row_bytes;
  const std::int64_t labels_end = options.labels_at + options.rows * options.label_bytes;
  if (data_end > static_cast<std::int64_t>(size) || labels_end > static_cast<std::int64_t>(size)) {
    std::fprintf(stderr, "gather_limit: %s holds %zu bytes, the rows need %lld\n", options.file.c_str(), size,
                 static_cast<long long>(std::max(data_end, labels_end)));
    return 1;
  }
  // Variable-length rows: the offsets held in memory, as strider's reader holds them.
  std::vector<std::int64_t> offsets;
  if (variable) {
    offsets.resize(static_cast<std::size_t>(options.rows + 1));
    std::memcpy(offsets.data(), base + options.offsets_at, offsets.size() * sizeof(std::int64_t));
  }
  const Rows rows(base + options.data_offset, options.row_bytes, variable ? offsets.data() : nullptr,
                  options.element_bytes, options.labels_at >= 0 ? base + options.labels_at : nullptr,
                  options.label_bytes);

  // R processes at once: each measures on its own and writes its figures into a pipe; they start
  // together (the parent lets them go once all exist) so that they really share the machine.
  std::vector<Figures> results(static_cast<std::size_t>(options.processes));
  if (options.processes == 1) {
    results[0] = measure(options, rows, 1234);
  } else {
    int go[2], back[2];
    if (::pipe(go) != 0 || ::pipe(back) != 0) {
      std::perror("pipe");
      return 1;
    }
    std::vector<pid_t> children;
    for (int p = 0; p < options.processes; ++p) {
      const pid_t child = ::fork();
      if (child < 0) {
        std::perror("fork");
        return 1;
      }
      if (child == 0) {
        ::close(go[1]);
        ::close(back[0]);
        char start = 0;
        if (!read_exactly(go[0], &start, 1)) std::_Exit(1);
        const Figures figures = measure(options, rows, 1234 + 7919 * p);
        write_exactly(back[1], &figures, sizeof figures);
        std::_Exit(0);
      }
      children.push_back(child);
    }
    ::close(go[0]);
    ::close(back[1]);
    const std::vector<char> start(static_cast<std::size_t>(options.processes), 1);
    write_exactly(go[1], start.data(), start.size());
    for (Figures& figures : results)
      if (!read_exactly(back[0], &figures, sizeof figures)) {
        std::fprintf(stderr, "gather_limit: a measuring process failed\n");
        return 1;
      }
    for (const pid_t child : children) ::waitpid(child, nullptr, 0);
  }

  double rows_per_s = 0, bytes_per_s = 0, plain = 0, prefetch = 0, prefetch_nta = 0, total_rows = 0, total_cpu = 0;
  for (const Figures& figures : results) {
    rows_per_s += figures.rows / figures.seconds;
    bytes_per_s += figures.bytes / figures.seconds;
    plain += figures.plain_rows_per_s;
    prefetch += figures.prefetch_t0_rows_per_s;
    prefetch_nta += figures.prefetch_nta_rows_per_s;
    total_rows += figures.rows;
    total_cpu += figures.cpu_seconds;
  }
  std::printf(
      "{\"processes\": %d, \"labels\": %s, \"rows_per_s\": %.1f, \"bytes_per_s\": %.1f, \"rows_per_cpu_s\": %.1f, "
      "\"plain_rows_per_s\": %.1f, \"prefetch_t0_rows_per_s\": %.1f, \"prefetch_nta_rows_per_s\": %.1f, "
      "\"per_process\": [",
      options.processes, options.labels_at >= 0 ? "true" : "false", rows_per_s, bytes_per_s,
      total_cpu > 0 ? total_rows / total_cpu : 0.0, plain, prefetch, prefetch_nta);
  for (std::size_t p = 0; p < results.size(); ++p)
    std::printf("%s{\"rows_per_s\": %.1f, \"rows\": %.0f, \"seconds\": %.4f, \"cpu_seconds\": %.4f}", p > 0 ? ", " : "",
                results[p].rows / results[p].seconds, results[p].rows, results[p].seconds, results[p].cpu_seconds);
  std::printf("]}\n");
  ::munmap(const_cast<std::byte*>(base), size);
  ::close(descriptor);
  return 0;
}
