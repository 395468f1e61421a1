// Device batches on the GPU, used the way a trainer with its own kernels uses them: every element
// type and conversion against the CPU twin (within the bound the README states), the ready event,
// a slot overwritten only after the trainer's release event, and the host batch kept until its copy
// has ended. Where the order matters, a kernel waits for a flag the host sets after put() returned,
// so the checks do not depend on how fast anything runs.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpu_test_support.hpp"
#include "strider/device/device_batches.hpp"
#include "strider/device/pinned_allocator.hpp"
#include "trainer_kernels.hpp"

using namespace strider;
using namespace strider::gpu_testing;

static_assert(std::is_same_v<DeviceEvent, cudaEvent_t>, "a trainer passes its cudaEvent_t as it is");

namespace {

void require_cuda(cudaError_t code, const char* what) {
  INFO(what << ": " << cudaGetErrorString(code));
  REQUIRE(code == cudaSuccess);
}

struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { require_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream); }
};

struct Event {
  cudaEvent_t event = nullptr;
  Event() { require_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event); }
};

template <typename T>
struct DeviceArray {
  T* data = nullptr;
  explicit DeviceArray(std::size_t count) {
    require_cuda(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(data); }
};

std::shared_ptr<HostAllocator> pinned() {
  static const std::shared_ptr<HostAllocator> allocator = make_pinned_allocator();
  return allocator;
}

// rows x features elements of `type` in pinned memory: random bit patterns for the integers;
// for the floats mostly values in [-1000, 1000], some random bit patterns, and the special values
// (NaN, infinities, subnormals, signed zero, the largest finite) at fixed places.
HostBuffer make_samples(ElementType type, std::int64_t elements, std::uint32_t seed) {
  const std::size_t size = element_bytes(type);
  HostBuffer buffer(pinned(), static_cast<std::size_t>(elements) * size);
  std::uint32_t state = seed;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  for (std::int64_t i = 0; i < elements; ++i) {
    std::byte* at = buffer.data() + static_cast<std::size_t>(i) * size;
    for (std::size_t b = 0; b < size; ++b) at[b] = static_cast<std::byte>(next() >> 24);
    if (element_is_integer(type) || next() % 8 == 0) continue;
    const float value = static_cast<float>(next() % 2000001) / 1000.0f - 1000.0f;
    if (type == ElementType::float32) std::memcpy(at, &value, 4);
    if (type == ElementType::float64) {
      const double wide = static_cast<double>(value) + 1e-9;
      std::memcpy(at, &wide, 8);
    }
    if (type == ElementType::float16) {
      const std::uint16_t half = float32_to_float16(value);
      std::memcpy(at, &half, 2);
    }
  }
  const std::vector<float> floats{NAN, INFINITY, -INFINITY, 1e-45f, -0.0f, 3.4028235e38f, 1e-40f};
  const std::vector<double> doubles{NAN, INFINITY, 1e300, -1e-310, -0.0, 1e-45};
  const std::vector<std::uint16_t> halves{0x7e00, 0x7c00, 0xfc00, 0x0001, 0x83ff, 0x7bff, 0x8000, 0x7d01};
  for (std::size_t k = 0; k < 8 && static_cast<std::int64_t>(k) < elements; ++k) {
    std::byte* at = buffer.data() + k * 7 % static_cast<std::size_t>(elements) * size;
    if (type == ElementType::float32 && k < floats.size()) std::memcpy(at, &floats[k], 4);
    if (type == ElementType::float64 && k < doubles.size()) std::memcpy(at, &doubles[k], 8);
    if (type == ElementType::float16) std::memcpy(at, &halves[k], 2);
  }
  return buffer;
}

// float32 or float16 bits as integers that grow with the value, so that their difference counts
// representable values (ulp) between two numbers of either sign.
std::int64_t ordered(std::uint32_t bits, int width) {
  const std::uint32_t sign = 1u << (width - 1);
  const auto magnitude = static_cast<std::int64_t>(bits & (sign - 1));
  return (bits & sign) != 0 ? -magnitude : magnitude;
}

struct Comparison {
  double worst_ulp = 0;
  std::int64_t mismatches = 0;  // NaN against a number, different infinities or zero signs
};

Comparison compare(ElementType type, const std::byte* gpu, const std::byte* cpu, std::int64_t elements) {
  Comparison result;
  for (std::int64_t i = 0; i < elements; ++i) {
    float a = 0, b = 0;
    std::uint32_t a_bits = 0, b_bits = 0;
    int width = 32;
    if (type == ElementType::float16) {
      std::uint16_t a16, b16;
      std::memcpy(&a16, gpu + i * 2, 2);
      std::memcpy(&b16, cpu + i * 2, 2);
      a = float16_to_float32(a16);
      b = float16_to_float32(b16);
      a_bits = a16;
      b_bits = b16;
      width = 16;
    } else {
      std::memcpy(&a, gpu + i * 4, 4);
      std::memcpy(&b, cpu + i * 4, 4);
      std::memcpy(&a_bits, &a, 4);
      std::memcpy(&b_bits, &b, 4);
    }
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b) || a == 0 || b == 0) {
      const bool same = (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
      if (!same) ++result.mismatches;
      continue;
    }
    const double ulp = static_cast<double>(std::llabs(ordered(a_bits, width) - ordered(b_bits, width)));
    result.worst_ulp = std::max(result.worst_ulp, ulp);
  }
  return result;
}

// The bytes of a device batch, read on `stream` after its ready event, as a trainer would.
std::vector<std::byte> read_back(const DeviceBatch& batch, cudaStream_t stream) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(batch.elements()) * element_bytes(batch.type()));
  require_cuda(cudaStreamWaitEvent(stream, batch.ready(), 0), "waiting for the batch's ready event");
  if (!bytes.empty()) {
    require_cuda(cudaMemcpyAsync(bytes.data(), batch.samples(), bytes.size(), cudaMemcpyDeviceToHost, stream),
                 "copying a device batch back");
  }
  require_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return bytes;
}

struct Case {
  const char* name;
  ConversionOptions conversion;
};

Normalization statistics(StatisticsLayout layout, std::size_t count) {
  Normalization normalization{layout, {}, {}};
  for (std::size_t k = 0; k < count; ++k) {
    normalization.mean.push_back(0.37f * static_cast<float>(k) - 1.5f);
    normalization.stddev.push_back(0.3f + 1.7f * static_cast<float>(k));
  }
  return normalization;
}

}  // namespace

TEST_CASE("device batches on the GPU equal the CPU twin for every element type and conversion", "[device-batches]") {
  constexpr std::int64_t rows = 257, features = 12;
  const std::vector<Case> cases{
      {"as stored", ConversionOptions{}},
      {"to float32", ConversionOptions{ElementType::float32, std::nullopt}},
      {"to float16", ConversionOptions{ElementType::float16, std::nullopt}},
      {"float32, per feature",
       ConversionOptions{ElementType::float32, statistics(StatisticsLayout::per_feature, features)}},
      {"float16, channels first",
       ConversionOptions{ElementType::float16, statistics(StatisticsLayout::channels_first, 3)}},
      {"float32, channels last",
       ConversionOptions{ElementType::float32, statistics(StatisticsLayout::channels_last, 3)}},
  };
  const std::vector<ElementType> types{ElementType::int8,    ElementType::uint8,  ElementType::int16,
                                       ElementType::uint16,  ElementType::int32,  ElementType::uint32,
                                       ElementType::int64,   ElementType::uint64, ElementType::float32,
                                       ElementType::float64, ElementType::float16};
  Stream stream;
  Event done;
  HostBuffer labels(pinned(), rows * sizeof(std::int32_t));
  for (std::int64_t i = 0; i < rows; ++i)
    reinterpret_cast<std::int32_t*>(labels.data())[i] = static_cast<std::int32_t>(i % 7);
  for (const Case& test_case : cases) {
    DeviceBatchOptions options;
    options.conversion = test_case.conversion;
    const auto gpu = make_device_batches("cuda", world(), options, nullptr);
    const auto cpu = make_device_batches("cpu", world(), options, nullptr);
    REQUIRE(gpu->name() == "cuda");
    Comparison worst;
    for (ElementType type : types) {
      INFO(test_case.name << ", " << element_name(type));
      const HostBuffer samples = make_samples(type, rows * features, 17 + static_cast<std::uint32_t>(type));
      BatchInput input;
      input.samples = samples.data();
      input.type = type;
      input.count = rows;
      input.features = features;
      input.labels = reinterpret_cast<const std::int32_t*>(labels.data());
      const DeviceBatch on_gpu = gpu->put(input);
      const DeviceBatch on_cpu = cpu->put(input);
      REQUIRE(on_gpu.type() == on_cpu.type());
      REQUIRE(on_gpu.elements() == on_cpu.elements());
      const std::vector<std::byte> bytes = read_back(on_gpu, stream.stream);
      std::vector<std::int32_t> gpu_labels(static_cast<std::size_t>(rows));
      require_cuda(cudaMemcpy(gpu_labels.data(), on_gpu.labels(), rows * sizeof(std::int32_t), cudaMemcpyDeviceToHost),
                   "copying the labels back");
      CHECK(std::memcmp(gpu_labels.data(), on_cpu.labels(), gpu_labels.size() * sizeof(std::int32_t)) == 0);
      if (on_gpu.type() == type && !test_case.conversion.normalization) {
        CHECK(std::memcmp(bytes.data(), on_cpu.samples(), bytes.size()) == 0);
      } else {
        const Comparison result =
            compare(on_gpu.type(), bytes.data(), static_cast<const std::byte*>(on_cpu.samples()), on_gpu.elements());
        CHECK(result.mismatches == 0);
        CHECK(result.worst_ulp <= (on_gpu.type() == ElementType::float16 ? 1.0 : 2.0));
        worst.worst_ulp = std::max(worst.worst_ulp, result.worst_ulp);
        worst.mismatches += result.mismatches;
      }
      require_cuda(cudaEventRecord(done.event, stream.stream), "recording the step's end");
      gpu->release(on_gpu, done.event);
      cpu->release(on_cpu, nullptr);
    }
    std::cout << "device batches, " << test_case.name << ": GPU against CPU at most " << worst.worst_ulp
              << " ulp apart, " << worst.mismatches << " special values differ" << std::endl;
  }
}

TEST_CASE("device batches: token sequences and a batch larger than one grid pass", "[device-batches]") {
  Stream stream;
  const auto gpu = make_device_batches("cuda", world(), {}, nullptr);
  const PinnedBatch tokens = make_token_batch(64, ElementType::int32, 5, 1000, 40, 17, 3);
  const DeviceBatch rows = gpu->put(tokens.input);
  const std::vector<std::byte> token_bytes = read_back(rows, stream.stream);
  const std::int64_t count = tokens.input.offsets[64] - tokens.input.offsets[0];
  REQUIRE(rows.elements() == count);
  CHECK(std::memcmp(token_bytes.data(), tokens.input.samples, token_bytes.size()) == 0);
  std::vector<std::int64_t> offsets(65);
  require_cuda(cudaMemcpy(offsets.data(), rows.offsets(), 65 * sizeof(std::int64_t), cudaMemcpyDeviceToHost),
               "copying the offsets back");
  CHECK(std::memcmp(offsets.data(), tokens.input.offsets, 65 * sizeof(std::int64_t)) == 0);
  gpu->release(rows, nullptr);

  // 100 images of 3 x 32 x 32 uint8, channels first: more elements than the kernel's grid has
  // threads, so each thread walks several elements and its feature index wraps; then samples of
  // 12 elements with the same options (the statistics on the device change).
  DeviceBatchOptions options;
  options.conversion = ConversionOptions{ElementType::float32, statistics(StatisticsLayout::channels_first, 3)};
  const auto normalizing = make_device_batches("cuda", world(), options, nullptr);
  const auto twin = make_device_batches("cpu", world(), options, nullptr);
  for (const std::int64_t features : {std::int64_t{3 * 32 * 32}, std::int64_t{12}}) {
    INFO(features << " elements per sample");
    const HostBuffer images = make_samples(ElementType::uint8, 100 * features, 99);
    BatchInput input;
    input.samples = images.data();
    input.type = ElementType::uint8;
    input.count = 100;
    input.features = features;
    const DeviceBatch on_gpu = normalizing->put(input);
    const DeviceBatch on_cpu = twin->put(input);
    const std::vector<std::byte> bytes = read_back(on_gpu, stream.stream);
    const Comparison result =
        compare(ElementType::float32, bytes.data(), static_cast<const std::byte*>(on_cpu.samples()), on_gpu.elements());
    CHECK(result.mismatches == 0);
    CHECK(result.worst_ulp <= 2.0);
    normalizing->release(on_gpu, nullptr);
    twin->release(on_cpu, nullptr);
  }
}

namespace {

// Pinned samples that are overwritten with NaN when their owner goes away.
struct PoisoningOwner {
  HostBuffer buffer;
  int* destroyed = nullptr;
  PoisoningOwner(HostBuffer b, int* d) : buffer(std::move(b)), destroyed(d) {}
  PoisoningOwner(PoisoningOwner&& other) noexcept : buffer(std::move(other.buffer)), destroyed(other.destroyed) {
    other.destroyed = nullptr;
  }
  ~PoisoningOwner() {
    if (destroyed == nullptr) return;
    auto* values = reinterpret_cast<float*>(buffer.data());
    for (std::size_t i = 0; i < buffer.size() / sizeof(float); ++i) values[i] = NAN;
    ++*destroyed;
  }
};

HostBuffer filled(std::int64_t count, float value) {
  HostBuffer buffer(pinned(), static_cast<std::size_t>(count) * sizeof(float));
  auto* values = reinterpret_cast<float*>(buffer.data());
  for (std::int64_t i = 0; i < count; ++i) values[i] = value;
  return buffer;
}

BatchInput floats(const HostBuffer& buffer, std::int64_t count) {
  BatchInput input;
  input.samples = buffer.data();
  input.type = ElementType::float32;
  input.count = count;
  input.features = 1;
  return input;
}

}  // namespace

TEST_CASE("a slot is overwritten only after the trainer's release event; the host batch lives until its copy ended",
          "[device-batches]") {
  // One slot. Batch A (all 1) is read by a trainer kernel that first waits for the host's flag; A
  // is released with the event after that kernel, and batch B (all 2) is put at once, owned by a
  // PoisoningOwner. The host sets the flag only after put(B) returned and a pause: a copy of B that
  // did not wait for the release event would have overwritten A by then (the kernel would sum 2s),
  // and a host batch dropped before its copy ran would reach the device as NaN.
  constexpr std::int64_t count = 1 << 16;
  DeviceBatchOptions options;
  options.slots = 1;
  const auto batches = make_device_batches("cuda", world(), options, nullptr);
  Stream stream;
  Event a_done, b_done;
  HostFlag go;
  DeviceArray<double> sums(2);
  DeviceArray<int> saw_go(2);

  const HostBuffer ones = filled(count, 1.0f);
  const DeviceBatch a = batches->put(floats(ones, count));
  require_cuda(cudaStreamWaitEvent(stream.stream, a.ready(), 0), "waiting for A");
  wait_then_sum(stream.stream, go, 20.0, a.data<float>(), count, sums.data, saw_go.data);
  require_cuda(cudaEventRecord(a_done.event, stream.stream), "recording A's release");
  batches->release(a, a_done.event);

  int destroyed = 0;
  HostBuffer twos = filled(count, 2.0f);
  const BatchInput b_input = floats(twos, count);
  const DeviceBatch b = batches->put(b_input, PoisoningOwner(std::move(twos), &destroyed));
  CHECK(b.slot() == a.slot());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  go.set();  // only now may the trainer's kernel read A

  require_cuda(cudaStreamWaitEvent(stream.stream, b.ready(), 0), "waiting for B");
  wait_then_sum(stream.stream, go, 20.0, b.data<float>(), count, sums.data + 1, saw_go.data + 1);
  require_cuda(cudaEventRecord(b_done.event, stream.stream), "recording B's release");
  batches->release(b, b_done.event);
  CHECK(destroyed == 1);  // dropped at the latest by release()
  require_cuda(cudaStreamSynchronize(stream.stream), "finishing the trainer's kernels");

  double host_sums[2] = {0, 0};
  int host_saw[2] = {0, 0};
  require_cuda(cudaMemcpy(host_sums, sums.data, sizeof(host_sums), cudaMemcpyDeviceToHost), "reading the sums");
  require_cuda(cudaMemcpy(host_saw, saw_go.data, sizeof(host_saw), cudaMemcpyDeviceToHost), "reading the flags");
  CHECK(host_saw[0] == 1);  // put(B) and release(A) returned while the trainer's kernel still waited
  CHECK(host_sums[0] == static_cast<double>(count));
  CHECK(host_sums[1] == 2.0 * static_cast<double>(count));
}
