// Device batches through the CPU twin (the CUDA engine is checked against it in tests/gpu): what a
// put() delivers, the slots' bookkeeping, the host owner's lifetime and the errors.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "device/device_batch_engine.hpp"
#include "strider/core/error.hpp"
#include "strider/device/device_batches.hpp"

using namespace strider;
using Catch::Matchers::Contains;

namespace {

DeviceBatches make_cpu_twin(DeviceBatchOptions options = {}) {
  return DeviceBatches(detail::make_cpu_device_batch_engine(), std::move(options));
}

// Host memory standing in for a Loader's batch: its destructor overwrites the samples, so a device
// batch that still read them afterwards would see the poison.
struct PoisoningOwner {
  std::vector<std::uint8_t>* samples;
  int* destroyed;
  PoisoningOwner(std::vector<std::uint8_t>* s, int* d) : samples(s), destroyed(d) {}
  PoisoningOwner(PoisoningOwner&& other) noexcept : samples(other.samples), destroyed(other.destroyed) {
    other.samples = nullptr;
  }
  PoisoningOwner(const PoisoningOwner&) = delete;
  ~PoisoningOwner() {
    if (samples == nullptr) return;
    std::fill(samples->begin(), samples->end(), std::uint8_t{0xee});
    ++*destroyed;
  }
};

BatchInput feature_input(const std::vector<std::uint8_t>& samples, std::int64_t features,
                         const std::vector<std::int32_t>* labels = nullptr) {
  BatchInput input;
  input.samples = reinterpret_cast<const std::byte*>(samples.data());
  input.type = ElementType::uint8;
  input.count = static_cast<std::int64_t>(samples.size()) / features;
  input.features = features;
  input.labels = labels != nullptr ? labels->data() : nullptr;
  return input;
}

}  // namespace

TEST_CASE("the CPU twin delivers converted, normalized samples and copies of the labels", "[device-batches]") {
  // Two 2x2 RGB images stored channels last; per-channel mean 100, 50, 0 and stddev 2, 4, 8.
  DeviceBatchOptions options;
  options.conversion.output = ElementType::float32;
  options.conversion.normalization = Normalization{StatisticsLayout::channels_last, {100, 50, 0}, {2, 4, 8}};
  DeviceBatches batches = make_cpu_twin(options);
  CHECK(batches.name() == "cpu");
  CHECK(batches.device() == -1);
  CHECK(batches.host_allocator()->name() == "page-aligned");
  CHECK(batches.slots() == 2);

  std::vector<std::uint8_t> pixels(24);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(10 * i);
  const std::vector<std::int32_t> labels{3, 1};
  int destroyed = 0;
  std::vector<std::uint8_t> stored = pixels;
  const DeviceBatch batch = batches.put(feature_input(stored, 12, &labels), PoisoningOwner(&stored, &destroyed));
  CHECK(destroyed == 1);  // the twin copies at once, so the host batch goes back at once
  CHECK(batches.held() == 1);
  CHECK(batch.type() == ElementType::float32);
  CHECK(batch.count() == 2);
  CHECK(batch.features() == 12);
  CHECK(batch.elements() == 24);
  CHECK(batch.ready() == nullptr);
  CHECK(batch.offsets() == nullptr);
  REQUIRE(batch.labels() != nullptr);
  CHECK(batch.labels()[0] == 3);
  CHECK(batch.labels()[1] == 1);
  const float* values = batch.data<float>();
  const float mean[3] = {100, 50, 0}, stddev[3] = {2, 4, 8};
  for (int image = 0; image < 2; ++image) {
    for (int pixel = 0; pixel < 4; ++pixel) {
      for (int channel = 0; channel < 3; ++channel) {
        const int i = image * 12 + pixel * 3 + channel;
        INFO("image " << image << " pixel " << pixel << " channel " << channel);
        CHECK(values[i] == (10.0f * static_cast<float>(i) - mean[channel]) / stddev[channel]);
      }
    }
  }
  CHECK_THROWS_AS(batch.data<double>(), UsageError);
  batches.release(batch, nullptr);
  CHECK(batches.held() == 0);
}

TEST_CASE("device slots: held until released, reused in release order, released once", "[device-batches]") {
  DeviceBatches batches = make_cpu_twin();
  const std::vector<std::uint8_t> samples{1, 2, 3, 4};
  const DeviceBatch first = batches.put(feature_input(samples, 2));
  const DeviceBatch second = batches.put(feature_input(samples, 2));
  CHECK(first.slot() != second.slot());
  CHECK(batches.held() == 2);
  CHECK_THROWS_WITH(batches.put(feature_input(samples, 2)), Contains("all 2 device slots are held"));

  batches.release(second, nullptr);
  const DeviceBatch third = batches.put(feature_input(samples, 2));
  CHECK(third.slot() == second.slot());
  batches.release(first, nullptr);
  batches.release(third, nullptr);
  const DeviceBatch fourth = batches.put(feature_input(samples, 2));
  CHECK(fourth.slot() == first.slot());  // released before third's slot

  CHECK_THROWS_WITH(batches.release(first, nullptr), Contains("not held here"));  // released already
  CHECK_THROWS_WITH(batches.release(DeviceBatch(), nullptr), Contains("not held here"));
  batches.release(fourth, nullptr);
  // Two fresh objects give their first batches the same slot and serial number.
  DeviceBatches mine = make_cpu_twin(), other = make_cpu_twin();
  const DeviceBatch own = mine.put(feature_input(samples, 2));
  const DeviceBatch foreign = other.put(feature_input(samples, 2));
  CHECK_THROWS_WITH(mine.release(foreign, nullptr), Contains("not held here"));
  mine.release(own, nullptr);
  other.release(foreign, nullptr);
  CHECK(batches.held() == 0);
  batches.synchronize();
}

TEST_CASE("stored bytes, token sequences and empty batches pass through unchanged", "[device-batches]") {
  DeviceBatches batches = make_cpu_twin(DeviceBatchOptions{{}, 3});
  CHECK(batches.slots() == 3);

  const std::vector<std::int16_t> values{-5, 7, 300, -32768};
  BatchInput fixed;
  fixed.samples = reinterpret_cast<const std::byte*>(values.data());
  fixed.type = ElementType::int16;
  fixed.count = 2;
  fixed.features = 2;
  const DeviceBatch stored = batches.put(fixed);
  CHECK(stored.type() == ElementType::int16);
  CHECK(std::memcmp(stored.samples(), values.data(), values.size() * sizeof(std::int16_t)) == 0);

  // Two rows of tokens whose offsets start at 10 (as a reader hands them over).
  const std::vector<std::int32_t> tokens{4, 5, 6};
  const std::vector<std::int64_t> offsets{10, 12, 13};
  const std::vector<std::int32_t> labels{0, 1};
  BatchInput sequences;
  sequences.samples = reinterpret_cast<const std::byte*>(tokens.data());
  sequences.type = ElementType::int32;
  sequences.count = 2;
  sequences.offsets = offsets.data();
  sequences.labels = labels.data();
  const DeviceBatch rows = batches.put(sequences);
  CHECK(rows.features() == 0);
  CHECK(rows.elements() == 3);
  CHECK(std::memcmp(rows.samples(), tokens.data(), 3 * sizeof(std::int32_t)) == 0);
  REQUIRE(rows.offsets() != nullptr);
  CHECK(std::vector<std::int64_t>(rows.offsets(), rows.offsets() + 3) == offsets);
  CHECK(rows.labels()[1] == 1);

  BatchInput empty;
  empty.type = ElementType::uint8;
  empty.features = 4;
  const DeviceBatch nothing = batches.put(empty);
  CHECK(nothing.count() == 0);
  CHECK(nothing.samples() == nullptr);
  CHECK(nothing.labels() == nullptr);
  for (const DeviceBatch& batch : {stored, rows, nothing}) batches.release(batch, nullptr);
}

TEST_CASE("the conversion follows the batches' element type and float16 output", "[device-batches]") {
  DeviceBatchOptions options;
  options.conversion.output = ElementType::float16;
  options.conversion.normalization = Normalization{StatisticsLayout::per_feature, {1, -1}, {0.5f, 2}};
  DeviceBatches batches = make_cpu_twin(options);
  const std::vector<std::uint8_t> bytes{3, 3};
  const std::vector<std::int16_t> shorts{-3, 5};
  BatchInput wide;
  wide.samples = reinterpret_cast<const std::byte*>(shorts.data());
  wide.type = ElementType::int16;
  wide.count = 1;
  wide.features = 2;
  const DeviceBatch narrow_batch = batches.put(feature_input(bytes, 2));
  const DeviceBatch wide_batch = batches.put(wide);
  CHECK(narrow_batch.type() == ElementType::float16);
  // (3 - 1) / 0.5 = 4 (0x4400), (3 + 1) / 2 = 2 (0x4000); (-3 - 1) / 0.5 = -8 (0xc800), (5 + 1) / 2 = 3 (0x4200).
  CHECK(narrow_batch.data<std::uint16_t>()[0] == 0x4400);
  CHECK(narrow_batch.data<std::uint16_t>()[1] == 0x4000);
  CHECK(wide_batch.data<std::uint16_t>()[0] == 0xc800);
  CHECK(wide_batch.data<std::uint16_t>()[1] == 0x4200);
  CHECK_THROWS_AS(wide_batch.data<float>(), UsageError);
  batches.release(narrow_batch, nullptr);
  batches.release(wide_batch, nullptr);
}

TEST_CASE("device batches refuse what does not fit, with one line", "[device-batches][errors]") {
  DeviceBatchOptions options;
  options.conversion.output = ElementType::float32;
  options.conversion.normalization = Normalization{StatisticsLayout::channels_first, {0, 0, 0}, {1, 1, 1}};
  DeviceBatches batches = make_cpu_twin(options);
  CHECK_THROWS_WITH(batches.prepare(ElementType::uint8, 10), Contains("3 channels does not fit samples of 10"));
  CHECK_THROWS_WITH(batches.prepare(ElementType::int32, 0), Contains("token sequences are copied as stored"));
  batches.prepare(ElementType::uint8, 12);

  const std::vector<std::uint8_t> samples(10);
  int destroyed = 0;
  std::vector<std::uint8_t> held = samples;
  CHECK_THROWS_WITH(batches.put(feature_input(held, 5), PoisoningOwner(&held, &destroyed)),
                    Contains("does not fit samples of 5"));
  CHECK(destroyed == 1);  // a refused batch's owner is dropped, not kept
  CHECK(batches.held() == 0);

  BatchInput no_data;
  no_data.type = ElementType::uint8;
  no_data.count = 2;
  no_data.features = 12;
  CHECK_THROWS_WITH(batches.put(no_data), Contains("a batch of samples without data"));
  BatchInput negative = no_data;
  negative.count = -1;
  CHECK_THROWS_WITH(batches.put(negative), Contains("negative batch size"));
  CHECK_THROWS_WITH(make_cpu_twin(DeviceBatchOptions{{}, 0}), Contains("slots must be 1..64, got 0"));
}
