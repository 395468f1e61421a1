#pragma once
/// \file
/// Logging with the rank in each line. The level comes from the environment variable
/// STRIDER_LOG_LEVEL (error, warn, info, debug; default info). Thread-safe: one line is written
/// with one call, so lines of different threads do not interleave.

#include <sstream>
#include <string>
#include <string_view>

namespace strider {

/// Log levels, from the most to the least severe.
enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

/// The level in force: STRIDER_LOG_LEVEL read once (or the value given to set_log_level).
LogLevel log_level() noexcept;
/// Overrides the level (tests, --verbose/--quiet options).
void set_log_level(LogLevel level) noexcept;
/// Parses "error", "warn", "info" or "debug"; throws UsageError otherwise.
LogLevel parse_log_level(std::string_view text);

/// Writes one line "strider[rank r] level: message" to stderr when level is enabled.
void log_line(LogLevel level, std::string_view message);

/// Writes one line "strider: message" to stdout on rank 0 only (or always without MPI): progress
/// and results that users read. To stderr instead after reports_to_stderr().
void print_on_root(std::string_view message);

/// Sends print_on_root's lines to stderr from now on: an app whose stdout carries JSON (`--json`
/// with no path) keeps it parseable.
void reports_to_stderr() noexcept;

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream stream;
  (stream << ... << parts);
  return stream.str();
}
}  // namespace detail

/// log_info("opened ", path, " with ", n, " samples"): the parts are streamed into one line.
template <typename... Parts>
void log_info(const Parts&... parts) {
  if (log_level() >= LogLevel::info) log_line(LogLevel::info, detail::concat(parts...));
}
template <typename... Parts>
void log_warn(const Parts&... parts) {
  if (log_level() >= LogLevel::warn) log_line(LogLevel::warn, detail::concat(parts...));
}
template <typename... Parts>
void log_debug(const Parts&... parts) {
  if (log_level() >= LogLevel::debug) log_line(LogLevel::debug, detail::concat(parts...));
}
template <typename... Parts>
void log_error(const Parts&... parts) {
  log_line(LogLevel::error, detail::concat(parts...));
}

}  // namespace strider
