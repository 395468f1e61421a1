// Staging a batch on a device while the current step runs, on the host side (no GPU): the slots'
// bookkeeping of the CUDA backend (device/staging_slots.hpp) and the loop's holder of the current and
// next batch (strider/device/step_batches.hpp). What must hold: a staged copy is used only for the
// batch that was staged; once its memory may be reused (unstaged, or after a failure) the next batch
// in that memory is copied again; every staged batch is unstaged before it is released, also when the
// loop breaks or unwinds through an exception.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/staging_slots.hpp"
#include "strider/device/step_batches.hpp"

using namespace strider;
using strider::detail::StagingKey;
using strider::detail::StagingSlots;

namespace {

/// A batch in host memory at `address` (only the pointer matters to the bookkeeping).
StagingKey key_at(std::uintptr_t address, std::int64_t count = 8) {
  BatchInput input;
  input.samples = reinterpret_cast<const std::byte*>(address);
  input.count = count;
  input.features = 4;
  input.labels = reinterpret_cast<const std::int32_t*>(address + 0x10000);
  return StagingKey(input);
}

}  // namespace

TEST_CASE("staging slots: a staged batch is found by its pointers until consumed", "[staging]") {
  StagingSlots slots(2);
  const StagingKey a = key_at(0x1000), b = key_at(0x2000);
  REQUIRE(slots.find_staged(a) == -1);
  const int slot_a = slots.choose_for_copy();
  slots.filled(slot_a, a, true);
  REQUIRE(slots.find_staged(a) == slot_a);
  REQUIRE(slots.find_staged(b) == -1);
  REQUIRE(slots.find_staged(key_at(0x1000, 9)) == -1);  // same memory, another shape
  // While a is staged, the next copy goes to the other slot.
  const int slot_b = slots.choose_for_copy();
  REQUIRE(slot_b != slot_a);
  slots.filled(slot_b, b, true);
  slots.consumed(slot_a);
  REQUIRE(slots.find_staged(a) == -1);
  REQUIRE(slots.find_staged(b) == slot_b);
  // The free slot is chosen next, never the one holding the staged b.
  REQUIRE(slots.choose_for_copy() == slot_a);
}

TEST_CASE("staging slots: with every slot staged, the batch staged first is dropped", "[staging]") {
  StagingSlots slots(2);
  const StagingKey a = key_at(0x1000), b = key_at(0x2000), c = key_at(0x3000);
  slots.filled(slots.choose_for_copy(), a, true);
  slots.filled(slots.choose_for_copy(), b, true);
  bool dropped = false;
  const int slot = slots.choose_for_copy(&dropped);
  REQUIRE(dropped);
  slots.filled(slot, c, true);
  REQUIRE(slots.find_staged(a) == -1);  // a step asking for a copies it again
  REQUIRE(slots.find_staged(b) >= 0);
  REQUIRE(slots.find_staged(c) == slot);
}

TEST_CASE("staging slots: after a failure or an unstage, memory reused by another batch is copied again", "[staging]") {
  // Ring buffer X holds batch k, which is staged; then a step fails. The prefetcher reuses X for a
  // later batch with the same shape: its pointers equal the staged key. Matching it would compute on
  // batch k's stale copy, so the failure must forget the staged copy.
  StagingSlots slots(2);
  const StagingKey in_x = key_at(0x5000);
  const int slot = slots.choose_for_copy();
  slots.filled(slot, in_x, true);
  REQUIRE(slots.forget_all() == 1);
  REQUIRE(slots.find_staged(in_x) == -1);
  REQUIRE(slots.forget_all() == 0);
  // The same through unstage: forget() names the slot whose copy the caller must wait for.
  slots.filled(slot, in_x, true);
  REQUIRE(slots.forget(key_at(0x6000)) == -1);
  REQUIRE(slots.forget(in_x) == slot);
  REQUIRE(slots.find_staged(in_x) == -1);
  REQUIRE(slots.forget(in_x) == -1);
  // Serial numbers count copies over all slots.
  const std::int64_t first = slots.filled(0, key_at(0x7000), false);
  REQUIRE(slots.filled(1, key_at(0x8000), false) == first + 1);
  REQUIRE(slots.serial(1) == first + 1);
}

namespace {

/// Everything the holder does, in order: "fetch N", "stage N", "unstage N", "release N".
using Events = std::vector<std::string>;

/// A batch numbered n at a fake address; its destructor records the release.
class FakeBatch {
 public:
  FakeBatch(int number, Events* events) : number_(number), events_(events) {}
  FakeBatch(FakeBatch&& other) noexcept : number_(other.number_), events_(std::exchange(other.events_, nullptr)) {}
  FakeBatch& operator=(FakeBatch&& other) noexcept {
    if (this != &other) {
      record_release();
      number_ = other.number_;
      events_ = std::exchange(other.events_, nullptr);
    }
    return *this;
  }
  FakeBatch(const FakeBatch&) = delete;
  FakeBatch& operator=(const FakeBatch&) = delete;
  ~FakeBatch() { record_release(); }
  int number() const { return number_; }
  BatchInput input() const {
    BatchInput input;
    input.samples = reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(0x1000 * (number_ + 1)));
    input.count = number_;
    return input;
  }

 private:
  void record_release() {
    if (events_ != nullptr) events_->push_back("release " + std::to_string(number_));
    events_ = nullptr;
  }
  int number_;
  Events* events_;
};

/// A backend that only records stage() and unstage(); nothing else is called here.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Events* events) : events_(events) {}
  void stage(const BatchInput& next) override { events_->push_back("stage " + std::to_string(next.count)); }
  void unstage(const BatchInput& batch) noexcept override {
    events_->push_back("unstage " + std::to_string(batch.count));
  }

  std::string name() const override { return "recording"; }
  void initialize(const ModelConfig& config) override { config_ = config; }
  const ModelConfig& config() const override { return config_; }
  std::int64_t parameter_count() const override { return 0; }
  void connect(const Communicator&) override {}
  std::shared_ptr<HostAllocator> host_allocator() const override { return make_page_aligned_allocator(); }
  bool overlaps_copies() const override { return true; }
  std::vector<float> parameters() const override { return {}; }
  void set_parameters(const std::vector<float>&) override {}
  std::vector<float> gradients() const override { return {}; }
  void zero_gradients() override {}
  StepResult forward_backward(const BatchInput&) override { return {}; }
  void all_reduce_gradients(const Communicator&, std::int64_t) override {}
  void scale_gradients(std::int64_t) override {}
  void apply_sgd(float, float) override {}
  std::vector<float> optimizer_state() const override { return {}; }
  void set_optimizer_state(const std::vector<float>&) override {}
  void predict(const BatchInput&, std::int32_t*) override {}

 private:
  Events* events_;
  ModelConfig config_;
};

/// Batches 0..count-1 from a counter.
struct Source {
  Events* events;
  int count;
  int fetched = 0;
  std::optional<FakeBatch> operator()() {
    if (fetched == count) return std::nullopt;
    events->push_back("fetch " + std::to_string(fetched));
    return FakeBatch(fetched++, events);
  }
};

/// Index of the first event equal to `event` (events.size() when none).
std::size_t position(const Events& events, const std::string& event) {
  return static_cast<std::size_t>(std::find(events.begin(), events.end(), event) - events.begin());
}

}  // namespace

TEST_CASE("step batches: with staging, batch k+1 is fetched and staged before step k runs", "[staging]") {
  Events events;
  RecordingBackend backend(&events);
  Source source{&events, 3};
  const auto input_of = [](const FakeBatch& batch) { return batch.input(); };
  std::vector<int> steps;
  {
    StepBatches<FakeBatch> batches(backend, true);
    for (int step = 0; step < 3; ++step) {
      FakeBatch* batch = batches.advance(source, input_of, step + 1 < 3);
      REQUIRE(batch != nullptr);
      steps.push_back(batch->number());
      REQUIRE(batches.holds_next() == (step + 1 < 3));
      events.push_back("step " + std::to_string(step));
    }
  }
  REQUIRE(steps == std::vector<int>{0, 1, 2});
  // Derived by hand: fetch 0, fetch 1 and stage it, step 0; batch 0 (never staged) is released, 1
  // becomes current, 2 is fetched and staged; step 1; 1 is unstaged and released, 2 is current; the
  // last step stages nothing; at the end 2 is unstaged and released.
  const Events expected = {"fetch 0", "fetch 1",   "stage 1",   "step 0", "release 0", "fetch 2",  "stage 2",
                           "step 1",  "unstage 1", "release 1", "step 2", "unstage 2", "release 2"};
  REQUIRE(events == expected);
}

TEST_CASE("step batches: an exception mid-step unstages the held batches before releasing them", "[staging]") {
  Events events;
  RecordingBackend backend(&events);
  Source source{&events, 10};
  const auto input_of = [](const FakeBatch& batch) { return batch.input(); };
  try {
    StepBatches<FakeBatch> batches(backend, true);
    batches.advance(source, input_of, true);
    batches.advance(source, input_of, true);  // current 1 (staged), next 2 (staged)
    throw std::runtime_error("a step failed");
  } catch (const std::runtime_error&) {
  }
  // Every staged batch is unstaged before its memory goes back (its copy may still read it).
  for (int n : {1, 2}) {
    const std::string number = std::to_string(n);
    REQUIRE(position(events, "unstage " + number) < position(events, "release " + number));
    REQUIRE(position(events, "release " + number) < events.size());
  }
  REQUIRE(position(events, "unstage 0") == events.size());  // 0 was never staged
  REQUIRE(position(events, "release 0") < events.size());
  REQUIRE(position(events, "fetch 3") == events.size());
}

TEST_CASE("step batches: without staging, one batch at a time and nothing staged", "[staging]") {
  Events events;
  RecordingBackend backend(&events);
  Source source{&events, 2};
  const auto input_of = [](const FakeBatch& batch) { return batch.input(); };
  {
    StepBatches<FakeBatch> batches(backend, false);
    REQUIRE(batches.advance(source, input_of, true)->number() == 0);
    REQUIRE_FALSE(batches.holds_next());
    REQUIRE(batches.advance(source, input_of, true)->number() == 1);
    REQUIRE(batches.advance(source, input_of, true) == nullptr);  // the source ran dry
    REQUIRE(batches.current() == nullptr);
  }
  const Events expected = {"fetch 0", "release 0", "fetch 1", "release 1"};
  REQUIRE(events == expected);
}
