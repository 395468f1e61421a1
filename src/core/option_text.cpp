#include "strider/core/option_text.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

#include "strider/core/error.hpp"

namespace strider {

namespace {

std::string invalid(std::string_view text, std::string_view name) {
  return "the argument ('" + std::string(text) + "') for option '--" + std::string(name) + "' is invalid";
}

template <typename T, typename Convert>
std::vector<T> parse_list(std::string_view text, std::string_view name, Convert convert) {
  std::vector<T> values;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(begin, end - begin));
    std::size_t used = 0;
    try {
      values.push_back(convert(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      STRIDER_THROW(UsageError,
                    "--" + std::string(name) + ": '" + item + "' is not a number (expected a comma-separated list)");
    begin = end + 1;
  }
  return values;
}

}  // namespace

std::int64_t parse_integer_option(std::string_view text, std::string_view name) {
  std::string_view digits = text;  // from_chars takes a '-' but no '+'
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
    if (!digits.empty() && digits.front() == '-') STRIDER_THROW(UsageError, invalid(text, name));
  }
  std::int64_t value = 0;
  if (digits.empty()) STRIDER_THROW(UsageError, invalid(text, name));
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) STRIDER_THROW(UsageError, invalid(text, name));
  return value;
}

int parse_int_option(std::string_view text, std::string_view name) {
  const std::int64_t value = parse_integer_option(text, name);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
    STRIDER_THROW(UsageError, invalid(text, name));
  return static_cast<int>(value);
}

bool parse_flag_option(std::string_view text, std::string_view name) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  STRIDER_THROW(UsageError, invalid(text, name));
}

std::vector<std::int64_t> parse_integer_list(std::string_view text, std::string_view name) {
  return parse_list<std::int64_t>(text, name, [](const std::string& item, std::size_t* used) {
    return static_cast<std::int64_t>(std::stoll(item, used));
  });
}

std::vector<double> parse_real_list(std::string_view text, std::string_view name) {
  return parse_list<double>(text, name,
                            [](const std::string& item, std::size_t* used) { return std::stod(item, used); });
}

std::int64_t parse_byte_size_option(std::string_view text, std::string_view name) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) STRIDER_THROW(UsageError, invalid(text, name));
  const std::int64_t number = parse_integer_option(text.substr(0, digits), name);
  std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (!suffix.empty()) {
    const std::string_view units = "KMGT";
    const std::size_t unit = units.find(static_cast<char>(suffix.front() & ~0x20));  // either case
    if (unit == std::string_view::npos) STRIDER_THROW(UsageError, invalid(text, name));
    shift = 10 * static_cast<int>(unit + 1);
    suffix.remove_prefix(1);
    if (suffix != "" && suffix != "B" && suffix != "iB") STRIDER_THROW(UsageError, invalid(text, name));
  }
  if (number > (std::numeric_limits<std::int64_t>::max() >> shift)) STRIDER_THROW(UsageError, invalid(text, name));
  return number << shift;
}

std::string format_shape(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string format_bytes(std::int64_t bytes) {
  if (bytes < 1000 && bytes > -1000) return std::to_string(bytes) + " bytes";
  const char* units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes) / 1000.0;
  int unit = 0;
  while ((value >= 1000.0 || value <= -1000.0) && unit < 5) {
    value /= 1000.0;
    ++unit;
  }
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(1);
  text << value << " " << units[unit];
  return text.str();
}

std::string nearest_name(std::string_view text, const std::vector<std::string>& names) {
  // Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours.
  const auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string& name : names) {
    const bool prefix = !text.empty() && name.size() > text.size() && name.compare(0, text.size(), text) == 0;
    const std::size_t d = prefix ? 1 : distance(text, name);
    if (d < best_distance && (prefix || d <= std::max<std::size_t>(1, name.size() / 3))) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

void check_choice(std::string_view value, const std::vector<std::string>& choices, std::string_view what) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return;
  std::string known;
  for (const std::string& choice : choices) known += (known.empty() ? "" : ", ") + choice;
  const std::string near = nearest_name(value, choices);
  STRIDER_THROW(UsageError, "unknown " + std::string(what) + " '" + std::string(value) + "'" +
                                (near.empty() ? "" : "; did you mean '" + near + "'?") + " (known: " + known + ")");
}

namespace {
/// The fewest significant digits that read back as `value` (`read` parses as its type does), in plain
/// notation for a number of 1 or more that has fewer than 18 characters (`300`, not `3e+02`).
template <typename Real, typename Read>
std::string shortest_text(Real value, Read read) {
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::ostringstream out;
    out.precision(digits);
    out << value;
    if (read(out.str().c_str()) == value) break;
  }
  std::ostringstream scientific;
  scientific.precision(digits);
  scientific << value;
  if (!std::isfinite(value) || value == 0 || scientific.str().find('e') == std::string::npos) return scientific.str();
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(static_cast<double>(value)))));
  std::ostringstream plain;
  plain << std::fixed << std::setprecision(std::max(0, digits - 1 - exponent)) << value;
  return exponent >= 0 && plain.str().size() < 18 ? plain.str() : scientific.str();
}
}  // namespace

std::string format_number(double value) {
  return shortest_text(value, [](const char* text) { return std::strtod(text, nullptr); });
}

std::string format_number(float value) {
  return shortest_text(value, [](const char* text) { return std::strtof(text, nullptr); });
}

std::string format_real_list(const std::vector<double>& values) {
  std::ostringstream text;
  text.precision(17);
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
  return text.str();
}

void check_output_path(const std::string& path, std::string_view option) {
  const std::string named = std::string(option) + " " + path;
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode))
    STRIDER_THROW(UsageError, named + " is a directory: give a file name");
  const std::size_t slash = path.find_last_of('/');
  const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
    STRIDER_THROW(UsageError, named + ": the directory " + directory + " does not exist");
  if (::access(directory.c_str(), W_OK) != 0)
    STRIDER_THROW(UsageError, named + ": the directory " + directory + " cannot be written");
}

}  // namespace strider
