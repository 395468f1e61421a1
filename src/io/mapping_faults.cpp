#include "io/mapping_faults.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace strider::io_detail {
namespace {

constexpr std::size_t kSlots = 1024;
constexpr std::size_t kWhatBytes = 384;

/// One mapping: its bytes [begin, end) (0, 0: free) and its name. The handler reads them without a
/// lock: `what` is written before `end` is published (release) and read after `end` (acquire).
struct Slot {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  char what[kWhatBytes] = {};
  std::size_t what_bytes = 0;
};

std::array<Slot, kSlots> slots;
std::mutex registration;  // registers and releases; never taken by the handler
struct sigaction previous_action {};
bool installed = false;

void write_all(const char* text, std::size_t bytes) noexcept {
  while (bytes > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, bytes);
    if (written <= 0) return;
    text += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

/// Async-signal-safe: atomics, write(2), sigaction(2).
extern "C" void on_bus_error(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  for (const Slot& slot : slots) {
    const std::uintptr_t end = slot.end.load(std::memory_order_acquire);
    const std::uintptr_t begin = slot.begin.load(std::memory_order_relaxed);
    if (end == 0 || address < begin || address >= end) continue;
    static constexpr char kPrefix[] = "strider: error: ";
    static constexpr char kSuffix[] =
        " could not be read through its mapping (SIGBUS): the file was truncated or rewritten while strider "
        "read it, or its storage failed; a data file must not change during a run\n";
    write_all(kPrefix, sizeof kPrefix - 1);
    write_all(slot.what, slot.what_bytes);
    write_all(kSuffix, sizeof kSuffix - 1);
    break;
  }
  // Whatever it was, the process dies of it as it would have: the earlier handler, or the default
  // action once this handler returns and the access faults again.
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(signal, info, context);
  } else if ((previous_action.sa_flags & SA_SIGINFO) == 0 && previous_action.sa_handler != SIG_DFL &&
             previous_action.sa_handler != SIG_IGN && previous_action.sa_handler != nullptr) {
    previous_action.sa_handler(signal);
  } else {
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    ::sigaction(SIGBUS, &fallback, nullptr);
  }
}

void install_handler() noexcept {
  struct sigaction action {};
  action.sa_sigaction = on_bus_error;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;
  installed = ::sigaction(SIGBUS, &action, &previous_action) == 0;
}

}  // namespace

int register_mapping(const void* begin, std::size_t bytes, const std::string& what) noexcept {
  if (begin == nullptr || bytes == 0) return -1;
  const std::lock_guard<std::mutex> lock(registration);
  if (!installed) install_handler();
  for (std::size_t index = 0; index < kSlots; ++index) {
    Slot& slot = slots[index];
    if (slot.end.load(std::memory_order_relaxed) != 0) continue;
    slot.what_bytes = std::min(what.size(), kWhatBytes);
    std::memcpy(slot.what, what.data(), slot.what_bytes);
    slot.begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_relaxed);
    slot.end.store(reinterpret_cast<std::uintptr_t>(begin) + bytes, std::memory_order_release);
    return static_cast<int>(index);
  }
  return -1;
}

void release_mapping(int slot) noexcept {
  if (slot < 0) return;
  const std::lock_guard<std::mutex> lock(registration);
  slots[static_cast<std::size_t>(slot)].end.store(0, std::memory_order_release);
}

}  // namespace strider::io_detail
