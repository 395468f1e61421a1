#include "strider/core/option_text.hpp"

#include <charconv>
#include <cstdlib>
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

std::string format_real_list(const std::vector<double>& values) {
  std::ostringstream text;
  text.precision(17);
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
  return text.str();
}

}  // namespace strider
