#pragma once
/// \file
/// Option values from text, checked whole, with errors that name the option (`--name`): what the
/// shared option table (strider/pipeline/loader_options.hpp), the apps and bindings parse with.
/// Pure functions, thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strider {

/// A decimal integer ("12", "-3", "+4"), the whole text. Throws UsageError
/// "the argument ('x') for option '--name' is invalid" (Boost.Program_options' words, which the
/// apps printed before the table existed) for anything else, also for values outside int64.
std::int64_t parse_integer_option(std::string_view text, std::string_view name);

/// parse_integer_option within the range of int.
int parse_int_option(std::string_view text, std::string_view name);

/// A flag's value: true|false, 1|0, yes|no, on|off. Throws UsageError naming `--name` otherwise.
bool parse_flag_option(std::string_view text, std::string_view name);

/// "1,2,3" into integers. Throws UsageError "--name: 'x' is not a number (expected a comma-separated
/// list)" for an empty or non-numeric item.
std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view name);

/// "0.5,1,2" into doubles; errors as parse_integer_list.
std::vector<double> parse_real_list(std::string_view text, std::string_view name);

/// A byte count: a plain number of bytes or one with a binary suffix K, M, G or T (KiB, MB, ... are
/// the same: all powers of 1024), e.g. "512M", "8G". Throws UsageError "the argument ('x') for option
/// '--name' is invalid" for anything else, a negative value or one beyond int64.
std::int64_t parse_byte_size_option(std::string_view text, std::string_view name);

/// Bytes for messages: "242.0 MB", "1.5 GB" (powers of 1000, one decimal; "512 bytes" below 1 kB).
std::string format_bytes(std::int64_t bytes);

/// A shape for messages: "[64]", "[3, 32, 32]" ("[]" for none).
std::string format_shape(const std::vector<std::int64_t>& dims);

/// Throws UsageError when a file the run will write at its end (or after hours) cannot be written
/// where `path` says: a directory that does not exist or cannot be written, or a path that is a
/// directory. `option` names it ("--checkpoint"). Checked at start, so that a typo does not cost the
/// run.
void check_output_path(const std::string& path, std::string_view option);

/// The name among `names` nearest to `text` (edit distance, a swap of neighbours counting one), when
/// it is near enough to be a typo of it (at most a third of its letters, at least one, or `text` a
/// prefix of it); "" otherwise.
std::string nearest_name(std::string_view text, const std::vector<std::string>& names);
/// Throws UsageError unless `value` is one of `choices`: "unknown sampler 'balancd'; did you mean
/// 'balanced'? (known: distributed, balanced, ...)". `what` names the kind of value ("sampler").
void check_choice(std::string_view value, const std::vector<std::string>& choices, std::string_view what);
/// A number for --help and messages as a person writes it: 0.1 for the float 0.1f (not 0.100000001),
/// 1e-05, 300.
std::string format_number(double value);
std::string format_number(float value);
/// Values back to text, comma-separated, each with the digits it needs to parse back exactly.
std::string format_real_list(const std::vector<double>& values);

}  // namespace strider
