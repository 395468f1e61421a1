// gather_limit: the memory-gather limit for shuffled rows. One core copies the rows of a shuffled
// epoch, batch by batch, straight out of the page-cached file mapped into memory (no sampler, no
// reader, no threads): what any loader of this file on this machine can at best do per core.
//   g++ -O2 -std=c++17 -o gather_limit gather_limit.cpp
//   gather_limit FILE DATA_OFFSET ROW_BYTES ROWS BATCH [SECONDS]             fixed-size rows
//   gather_limit FILE DATA_OFFSET ELEMENT_BYTES ROWS BATCH SECONDS OFFSETS_AT  variable rows: int64
//        offsets[ROWS+1] at byte OFFSETS_AT, row i is elements [offsets[i], offsets[i+1]) of the data
// Prints one JSON object: rows_per_s, bytes_per_s, rows, bytes, seconds.
// Copies whole shuffled epochs (a fresh permutation each) until SECONDS (default 1) have passed.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: gather_limit FILE DATA_OFFSET ROW_BYTES|ELEMENT_BYTES ROWS BATCH [SECONDS [OFFSETS_AT]]\n");
    return 2;
  }
  const char* path = argv[1];
  const std::int64_t data_offset = std::atoll(argv[2]);
  const std::int64_t unit = std::atoll(argv[3]);
  const std::int64_t rows = std::atoll(argv[4]);
  const std::int64_t batch = std::atoll(argv[5]);
  const double seconds = argc > 6 ? std::atof(argv[6]) : 1.0;
  const bool variable = argc > 7;
  const std::int64_t offsets_at = variable ? std::atoll(argv[7]) : 0;

  const int descriptor = ::open(path, O_RDONLY);
  if (descriptor < 0) {
    std::perror(path);
    return 1;
  }
  struct stat info {};
  ::fstat(descriptor, &info);
  const std::size_t size = static_cast<std::size_t>(info.st_size);
  auto* base =
      static_cast<const std::byte*>(::mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, descriptor, 0));
  if (base == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  const std::byte* data = base + data_offset;

  std::vector<std::int64_t> begin(rows), length(rows);
  if (variable) {
    std::vector<std::int64_t> offsets(rows + 1);
    std::memcpy(offsets.data(), base + offsets_at, sizeof(std::int64_t) * (rows + 1));
    for (std::int64_t i = 0; i < rows; ++i) {
      begin[i] = offsets[i] * unit;
      length[i] = (offsets[i + 1] - offsets[i]) * unit;
    }
  } else {
    for (std::int64_t i = 0; i < rows; ++i) {
      begin[i] = i * unit;
      length[i] = unit;
    }
  }
  const std::int64_t longest = *std::max_element(length.begin(), length.end());
  std::vector<std::byte> buffer(static_cast<std::size_t>(batch * longest));
  std::vector<std::int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(1234);

  // Warm-up: touch every byte of the data once (the mapping is populated; this fills the TLB/caches path).
  volatile std::uint64_t sink = 0;
  for (std::int64_t i = 0; i < rows; i += 1) sink = sink + static_cast<std::uint64_t>(data[begin[i]]);

  std::int64_t copied_rows = 0, copied_bytes = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    std::shuffle(order.begin(), order.end(), random);  // not timed: the sampler's share
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t first = 0; first < rows; first += batch) {
      const std::int64_t last = std::min(rows, first + batch);
      std::byte* out = buffer.data();
      for (std::int64_t k = first; k < last; ++k) {
        const std::int64_t row = order[k];
        std::memcpy(out, data + begin[row], static_cast<std::size_t>(length[row]));
        out += length[row];
      }
      copied_bytes += out - buffer.data();
      sink = sink + static_cast<std::uint64_t>(buffer[0]);
    }
    elapsed += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    copied_rows += rows;
  }
  std::printf("{\"rows_per_s\": %.1f, \"bytes_per_s\": %.1f, \"rows\": %lld, \"bytes\": %lld, \"seconds\": %.4f}\n",
              copied_rows / elapsed, copied_bytes / elapsed, static_cast<long long>(copied_rows),
              static_cast<long long>(copied_bytes), elapsed);
  ::munmap(const_cast<std::byte*>(base), size);
  ::close(descriptor);
  return 0;
}
