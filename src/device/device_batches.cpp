// DeviceBatches: the slots' bookkeeping, the checks of a batch and its layout in a slot, and the
// host batches kept alive until their copies end. The engines (src/device/cpu/, src/device/cuda/)
// move and convert the bytes.
#include "strider/device/device_batches.hpp"

#include <optional>
#include <vector>

#include "device/device_batch_engine.hpp"
#include "device/device_choice.hpp"
#include "strider/core/log.hpp"

namespace strider {
namespace {

constexpr int max_slots = 64;

std::size_t align_up(std::size_t bytes) {
  constexpr std::size_t alignment = detail::SlotLayout::slot_alignment;
  return (bytes + alignment - 1) / alignment * alignment;
}

bool asks_for_conversion(const ConversionOptions& conversion) {
  return conversion.output.has_value() || conversion.normalization.has_value();
}

}  // namespace

struct DeviceBatches::State {
  struct Slot {
    bool held = false;
    bool copy_pending = false;      ///< its copy may still read the host memory
    std::uint64_t serial = 0;       ///< of the batch in it
    std::uint64_t released_at = 0;  ///< when it was last released (0: never used)
    std::shared_ptr<void> owner;    ///< keeps the host memory of a pending copy alive
  };

  std::unique_ptr<detail::DeviceBatchEngine> engine;
  DeviceBatchOptions options;
  std::optional<ElementConversion> conversion;  ///< for the last fixed-size samples' type and size
  std::vector<Slot> slots;
  std::uint64_t next_serial = 1;
  std::uint64_t release_clock = 0;
  int held = 0;

  /// The conversion for samples of `features` elements of `type`, made (and its statistics put on
  /// the device) when the type or size changed.
  const ElementConversion& conversion_for(ElementType type, std::int64_t features) {
    if (!conversion || conversion->input_type() != type || conversion->features() != features) {
      conversion.reset();
      ElementConversion made(type, features, options.conversion);
      if (made.normalizes()) engine->prepare(made);
      conversion.emplace(std::move(made));
    }
    return *conversion;
  }

  void drop_owner(Slot& slot) {
    slot.copy_pending = false;
    slot.owner.reset();
  }
};

DeviceBatches::DeviceBatches(std::unique_ptr<detail::DeviceBatchEngine> engine, DeviceBatchOptions options)
    : state_(std::make_unique<State>()) {
  STRIDER_REQUIRE(engine != nullptr, "DeviceBatches needs an engine: use make_device_batches");
  STRIDER_REQUIRE(
      options.slots >= 1 && options.slots <= max_slots,
      "DeviceBatchOptions::slots must be 1.." + std::to_string(max_slots) + ", got " + std::to_string(options.slots));
  state_->engine = std::move(engine);
  state_->options = std::move(options);
  state_->slots.resize(static_cast<std::size_t>(state_->options.slots));
  state_->engine->create_slots(state_->options.slots);
}

DeviceBatches::~DeviceBatches() {
  if (!state_) return;
  state_->engine->finish();
  for (State::Slot& slot : state_->slots) state_->drop_owner(slot);
}

std::string DeviceBatches::name() const {
  return state_->engine->name();
}

int DeviceBatches::device() const {
  return state_->engine->device();
}

std::shared_ptr<HostAllocator> DeviceBatches::host_allocator() const {
  return state_->engine->host_allocator();
}

int DeviceBatches::slots() const noexcept {
  return static_cast<int>(state_->slots.size());
}

int DeviceBatches::held() const noexcept {
  return state_->held;
}

void DeviceBatches::prepare(ElementType type, std::int64_t features) {
  if (features == 0) {
    STRIDER_REQUIRE(!asks_for_conversion(state_->options.conversion),
                    "device batches of token sequences are copied as stored: the conversion options apply to "
                    "fixed-size samples only");
    return;
  }
  state_->conversion_for(type, features);
}

void DeviceBatches::drop_finished_owners() {
  for (std::size_t index = 0; index < state_->slots.size(); ++index) {
    State::Slot& slot = state_->slots[index];
    if (slot.copy_pending && state_->engine->copy_finished(static_cast<int>(index))) state_->drop_owner(slot);
  }
}

DeviceBatch DeviceBatches::put_batch(const BatchInput& host, std::shared_ptr<void> owner) {
  State& state = *state_;
  drop_finished_owners();
  STRIDER_REQUIRE(host.count >= 0, "DeviceBatches::put: negative batch size " + std::to_string(host.count));

  // What the slot will hold.
  const ElementConversion* conversion = nullptr;
  std::int64_t elements = 0;
  ElementType type = host.type;
  if (host.offsets != nullptr) {
    prepare(host.type, 0);
    elements = host.offsets[host.count] - host.offsets[0];
    STRIDER_REQUIRE(elements >= 0, "DeviceBatches::put: token offsets end before they start (" +
                                       std::to_string(host.offsets[0]) + " .. " +
                                       std::to_string(host.offsets[host.count]) + ")");
  } else {
    STRIDER_REQUIRE(host.features >= 1, "DeviceBatches::put: fixed-size samples need at least one element each, got " +
                                            std::to_string(host.features));
    conversion = &state.conversion_for(host.type, host.features);
    type = conversion->output_type();
    if (!conversion->converts()) conversion = nullptr;
    elements = host.count * host.features;
  }
  STRIDER_REQUIRE(elements == 0 || host.samples != nullptr, "DeviceBatches::put: a batch of samples without data");
  detail::SlotLayout layout;
  layout.input_bytes = static_cast<std::size_t>(elements) * element_bytes(host.type);
  layout.sample_bytes = static_cast<std::size_t>(elements) * element_bytes(type);
  layout.label_bytes = host.labels != nullptr ? static_cast<std::size_t>(host.count) * sizeof(std::int32_t) : 0;
  layout.offset_bytes = host.offsets != nullptr ? static_cast<std::size_t>(host.count + 1) * sizeof(std::int64_t) : 0;
  layout.labels_at = align_up(layout.sample_bytes);
  layout.offsets_at = layout.labels_at + align_up(layout.label_bytes);
  layout.total = layout.offsets_at + align_up(layout.offset_bytes);

  // The free slot released longest ago (slots never used first).
  int index = -1;
  for (std::size_t i = 0; i < state.slots.size(); ++i) {
    const State::Slot& slot = state.slots[i];
    if (!slot.held && (index < 0 || slot.released_at < state.slots[static_cast<std::size_t>(index)].released_at))
      index = static_cast<int>(i);
  }
  if (index < 0) {
    STRIDER_THROW(UsageError, "DeviceBatches::put: all " + std::to_string(state.slots.size()) +
                                  " device slots are held; release(batch, event) one first, or ask for more with "
                                  "DeviceBatchOptions::slots");
  }

  std::byte* base = state.engine->copy(index, host, layout, conversion);
  State::Slot& slot = state.slots[static_cast<std::size_t>(index)];
  slot.held = true;
  slot.copy_pending = true;
  slot.owner = std::move(owner);
  slot.serial = state.next_serial++;
  ++state.held;
  if (state.engine->copy_finished(index)) state.drop_owner(slot);  // the CPU twin copies at once

  DeviceBatch batch;
  batch.samples_ = layout.sample_bytes > 0 ? base : nullptr;
  batch.type_ = type;
  batch.count_ = host.count;
  batch.features_ = host.offsets != nullptr ? 0 : host.features;
  batch.elements_ = elements;
  batch.labels_ = layout.label_bytes > 0 ? reinterpret_cast<const std::int32_t*>(base + layout.labels_at) : nullptr;
  batch.offsets_ = layout.offset_bytes > 0 ? reinterpret_cast<const std::int64_t*>(base + layout.offsets_at) : nullptr;
  batch.ready_ = state.engine->ready(index);
  batch.slot_ = index;
  batch.serial_ = slot.serial;
  batch.source_ = state_.get();
  return batch;
}

void DeviceBatches::release(const DeviceBatch& batch, DeviceEvent done) {
  State& state = *state_;
  const bool held = batch.source_ == state_.get() && batch.slot_ >= 0 && batch.slot_ < slots() &&
                    state.slots[static_cast<std::size_t>(batch.slot_)].held &&
                    state.slots[static_cast<std::size_t>(batch.slot_)].serial == batch.serial_;
  STRIDER_REQUIRE(held,
                  "DeviceBatches::release: the batch is not held here (released twice, never put, or put by "
                  "another DeviceBatches)");
  State::Slot& slot = state.slots[static_cast<std::size_t>(batch.slot_)];
  state.engine->release(batch.slot_, done);
  if (slot.copy_pending) {
    // The host memory must outlive the copy: a put() without owner promises it only until now.
    state.engine->wait_for_copy(batch.slot_);
    state.drop_owner(slot);
  }
  slot.held = false;
  slot.released_at = ++state.release_clock;
  --state.held;
  drop_finished_owners();
}

void DeviceBatches::synchronize() {
  state_->engine->synchronize();
  for (State::Slot& slot : state_->slots) state_->drop_owner(slot);
}

std::unique_ptr<DeviceBatches> make_device_batches(const std::string& choice, const Communicator& comm,
                                                   DeviceBatchOptions options, std::string* why) {
  STRIDER_REQUIRE(
      options.slots >= 1 && options.slots <= max_slots,
      "DeviceBatchOptions::slots must be 1.." + std::to_string(max_slots) + ", got " + std::to_string(options.slots));
  const std::optional<ElementType>& output = options.conversion.output;
  STRIDER_REQUIRE(!output || *output == ElementType::float32 || *output == ElementType::float16,
                  std::string("device batches convert samples to float32 or float16, not to ") +
                      element_name(output.value_or(ElementType::float32)));
  STRIDER_REQUIRE(output || !options.conversion.normalization,
                  "normalization needs a float output type: set DeviceBatchOptions::conversion.output to float32 or "
                  "float16");
  const detail::DeviceChoice chosen =
      detail::choose_device_kind(choice, comm, "device batches", "make_device_batches choice");
  if (!chosen.warning.empty()) log_warn(chosen.warning);
  if (why != nullptr) *why = chosen.why;
  std::unique_ptr<detail::DeviceBatchEngine> engine;
#if STRIDER_HAS_CUDA
  if (chosen.cuda) engine = detail::make_cuda_device_batch_engine(chosen.device, output == ElementType::float16);
#endif
  if (!engine) engine = detail::make_cpu_device_batch_engine();
  return std::make_unique<DeviceBatches>(std::move(engine), std::move(options));
}

}  // namespace strider
