#pragma once
// An in-memory BatchReader for pipeline tests: sample i's bytes are a function of i, labels are
// i % classes, sequences have length 1 + i % 7. It can fail at a chosen read, be slowed down, and
// report its reads and its destruction to a probe that outlives it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "strider/core/error.hpp"
#include "strider/io/batch_reader.hpp"

namespace strider::testing {

/// What a test sees of a FakeReader from outside, also after the reader is gone. Thread-safe.
struct FakeReaderProbe {
  std::atomic<std::int64_t> reads{0};                      ///< read() calls begun
  std::atomic<std::int64_t> reads_in_flight{0};            ///< read() calls begun and not yet returned
  std::atomic<bool> destroyed{false};                      ///< the reader's destructor ran
  std::atomic<std::int64_t> in_flight_at_destruction{-1};  ///< reads_in_flight when it did
  std::atomic<std::int64_t> batch_groups{0};               ///< read_batches() calls
  std::atomic<std::int64_t> largest_group{0};              ///< the most batches one of them carried
};

struct FakeReaderOptions {
  std::int64_t samples = 1000;
  std::int64_t sample_floats = 4;  // fixed-size samples: floats per sample
  bool variable_length = false;    // sequences of int32 tokens instead
  int classes = 5;
  std::int64_t fail_at_read = -1;          // throw DataError on this read call (0-based)
  std::chrono::microseconds delay{0};      // sleep per read
  std::int64_t delay_phase_reads = 0;      // > 0: the delay in alternate runs of this many reads, the first slow
  std::int64_t batches_per_read = 1;       // what batches_per_read() says
  std::shared_ptr<FakeReaderProbe> probe;  // optional: told of every read and of the destruction
};

/// The value of element e of sample i (fixed-size) or token e of row i (sequences).
inline float fake_value(std::int64_t sample, std::int64_t element) {
  return static_cast<float>(sample * 1000 + element);
}

class FakeReader final : public BatchReader {
 public:
  explicit FakeReader(FakeReaderOptions options) : options_(options) {
    info_.path = "fake";
    info_.num_samples = options.samples;
    info_.variable_length = options.variable_length;
    info_.has_labels = options.classes > 0;
    info_.layout = "contiguous";
    if (options.variable_length) {
      info_.element_type = ElementType::int32;
      for (std::int64_t i = 0; i < options.samples; ++i) lengths_.push_back(1 + i % 7);
      for (std::int64_t length : lengths_) info_.num_tokens += length;
    } else {
      info_.element_type = ElementType::float32;
      info_.sample_shape = {options.sample_floats};
      info_.sample_bytes = options.sample_floats * 4;
    }
    for (std::int64_t i = 0; options.classes > 0 && i < options.samples; ++i)
      labels_.push_back(static_cast<std::int32_t>(i % options.classes));
  }

  ~FakeReader() override {
    if (options_.probe) {
      options_.probe->in_flight_at_destruction = options_.probe->reads_in_flight.load();
      options_.probe->destroyed = true;
    }
  }
  FakeReader(const FakeReader&) = delete;
  FakeReader& operator=(const FakeReader&) = delete;

  std::string engine() const override { return "fake"; }
  const DatasetInfo& info() const override { return info_; }
  SharedView<std::int32_t> labels() const override { return SharedView<std::int32_t>::borrow(labels_); }
  SharedView<std::int64_t> lengths() const override { return SharedView<std::int64_t>::borrow(lengths_); }
  void read_labels(std::int64_t first, std::int64_t count, std::int32_t* out) override {
    std::copy(labels_.begin() + first, labels_.begin() + first + count, out);
  }
  std::int64_t samples_bytes(const std::int64_t* indices, std::int64_t count) const override {
    if (!info_.variable_length) return count * info_.sample_bytes;
    std::int64_t bytes = 0;
    for (std::int64_t i = 0; i < count; ++i) bytes += lengths_[static_cast<std::size_t>(indices[i])] * 4;
    return bytes;
  }
  void read(const std::int64_t* indices, std::int64_t count, const BatchDestination& out) override {
    const std::int64_t call = calls_++;
    const InFlight in_flight(options_.probe.get());
    const bool slow = options_.delay_phase_reads <= 0 || call / options_.delay_phase_reads % 2 == 0;
    if (options_.delay.count() > 0 && slow) std::this_thread::sleep_for(options_.delay);
    if (call == options_.fail_at_read)
      STRIDER_THROW(DataError, "injected read failure at read " + std::to_string(call));
    if (samples_bytes(indices, count) > out.samples_capacity_bytes) STRIDER_THROW(UsageError, "batch does not fit");
    std::int64_t cursor = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t sample = indices[i];
      if (sample < 0 || sample >= info_.num_samples) STRIDER_THROW(UsageError, "index out of range");
      const std::int64_t elements =
          info_.variable_length ? lengths_[static_cast<std::size_t>(sample)] : options_.sample_floats;
      if (out.offsets != nullptr) out.offsets[i] = cursor;
      for (std::int64_t e = 0; e < elements; ++e) {
        if (info_.variable_length) {
          const auto token = static_cast<std::int32_t>(fake_value(sample, e));
          std::memcpy(out.samples + (cursor + e) * 4, &token, 4);
        } else {
          const float value = fake_value(sample, e);
          std::memcpy(out.samples + (cursor + e) * 4, &value, 4);
        }
      }
      cursor += elements;
      if (out.labels != nullptr && info_.has_labels) out.labels[i] = labels_[static_cast<std::size_t>(sample)];
    }
    if (out.offsets != nullptr) out.offsets[count] = cursor;
    stats_.bytes_read += cursor * 4;
    stats_.useful_bytes += cursor * 4;
    stats_.batches += 1;
    stats_.read_calls += 1;
  }
  /// Counted in the probe, then read() per batch (the default).
  void read_batches(const BatchRead* reads, std::int64_t count) override {
    if (options_.probe) {
      ++options_.probe->batch_groups;
      std::int64_t largest = options_.probe->largest_group.load();
      while (count > largest && !options_.probe->largest_group.compare_exchange_weak(largest, count)) {
      }
    }
    BatchReader::read_batches(reads, count);
  }
  std::int64_t batches_per_read() const override { return options_.batches_per_read; }
  ReadStats stats() const override { return stats_; }
  std::int64_t calls() const { return calls_.load(); }

 private:
  /// Counts a read in the probe's reads_in_flight while it lasts (also when it throws).
  class InFlight {
   public:
    explicit InFlight(FakeReaderProbe* probe) : probe_(probe) {
      if (probe_) ++probe_->reads, ++probe_->reads_in_flight;
    }
    ~InFlight() {
      if (probe_) --probe_->reads_in_flight;
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    FakeReaderProbe* probe_;
  };

  FakeReaderOptions options_;
  DatasetInfo info_;
  std::vector<std::int32_t> labels_;
  std::vector<std::int64_t> lengths_;
  std::atomic<std::int64_t> calls_{0};
  ReadStats stats_;
};

}  // namespace strider::testing
