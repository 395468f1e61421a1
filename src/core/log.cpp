#include "strider/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strider/core/error.hpp"

namespace strider {
namespace {

constexpr int unset_level = -1;
std::atomic<int> level_override{unset_level};

LogLevel level_from_environment() noexcept {
  const char* text = std::getenv("STRIDER_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return LogLevel::info;
  try {
    return parse_log_level(text);
  } catch (...) {
    std::fprintf(stderr, "strider: warning: STRIDER_LOG_LEVEL='%s' is not error|warn|info|debug; using info\n", text);
    return LogLevel::info;
  }
}

const char* level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warn";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "?";
}

}  // namespace

LogLevel log_level() noexcept {
  int overridden = level_override.load(std::memory_order_relaxed);
  if (overridden != unset_level) return static_cast<LogLevel>(overridden);
  static const LogLevel from_environment = level_from_environment();
  return from_environment;
}

void set_log_level(LogLevel level) noexcept {
  level_override.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel parse_log_level(std::string_view text) {
  if (text == "error") return LogLevel::error;
  if (text == "warn" || text == "warning") return LogLevel::warn;
  if (text == "info") return LogLevel::info;
  if (text == "debug") return LogLevel::debug;
  STRIDER_THROW(UsageError, "unknown log level '" + std::string(text) + "' (use error, warn, info or debug)");
}

void log_line(LogLevel level, std::string_view message) {
  if (level > log_level()) return;
  int rank = current_world_rank();
  std::string line = rank >= 0 ? "strider[rank " + std::to_string(rank) + "] " : std::string("strider ");
  line += level_name(level);
  line += ": ";
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

namespace {
std::atomic<bool> reports_on_stderr{false};
}  // namespace

void reports_to_stderr() noexcept {
  reports_on_stderr = true;
}

void print_on_root(std::string_view message) {
  if (current_world_rank() > 0) return;
  std::string line = "strider: ";
  line += message;
  line += '\n';
  std::FILE* stream = reports_on_stderr ? stderr : stdout;
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fflush(stream);
}

}  // namespace strider
