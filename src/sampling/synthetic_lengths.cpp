#include "strider/sampling/synthetic_lengths.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "strider/core/error.hpp"
#include "strider/sampling/random.hpp"

namespace strider {

namespace {

constexpr std::uint64_t lengths_stream = 0x4c454e4754480001ULL;  // "LENGTH" 1

// A double in (0, 1] from 53 random bits (portable, unlike std::uniform_real_distribution).
double unit_open_below(std::mt19937_64& engine) {
  return static_cast<double>((engine() >> 11) + 1) * 0x1.0p-53;
}

std::map<std::string, double> parse_parameters(const std::string& spec, const std::string& text) {
  std::map<std::string, double> parameters;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const std::size_t equals = item.find('=');
    std::size_t used = 0;
    double value = 0;
    try {
      if (equals != std::string::npos) value = std::stod(item.substr(equals + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (equals == std::string::npos || used == 0 || used != item.size() - equals - 1)
      STRIDER_THROW(UsageError, "lengths '" + spec + "': '" + item + "' is not name=number");
    parameters[item.substr(0, equals)] = value;
    begin = end + 1;
  }
  return parameters;
}

double parameter(const std::map<std::string, double>& parameters, const std::string& spec, const std::string& name) {
  const auto found = parameters.find(name);
  if (found == parameters.end()) STRIDER_THROW(UsageError, "lengths '" + spec + "': missing " + name + "=");
  return found->second;
}

}  // namespace

std::vector<std::int64_t> synthetic_lengths(const std::string& spec, std::int64_t count, std::int64_t seed) {
  if (count < 0) STRIDER_THROW(UsageError, "lengths: count must be >= 0, got " + std::to_string(count));
  const std::size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const auto parameters = parse_parameters(spec, colon == std::string::npos ? "" : spec.substr(colon + 1));
  const double low = parameter(parameters, spec, "min"), high = parameter(parameters, spec, "max");
  if (!(low >= 1 && low <= high)) STRIDER_THROW(UsageError, "lengths '" + spec + "': need 1 <= min <= max");
  const auto min_length = static_cast<std::int64_t>(std::ceil(low)),
             max_length = static_cast<std::int64_t>(std::floor(high));

  std::mt19937_64 engine(derive_seed(seed, 0, lengths_stream));
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(count));
  if (kind == "lognormal") {
    const double median = parameter(parameters, spec, "median");
    const double sigma = parameters.count("sigma") ? parameters.at("sigma") : 1.0;
    if (!(median > 0 && sigma >= 0)) STRIDER_THROW(UsageError, "lengths '" + spec + "': need median > 0, sigma >= 0");
    const double log_median = std::log(median);
    for (std::int64_t& length : lengths) {
      // Box-Muller, one normal per pair of uniforms (simple, portable).
      const double normal =
          std::sqrt(-2.0 * std::log(unit_open_below(engine))) * std::cos(6.283185307179586 * unit_open_below(engine));
      const double value = std::exp(log_median + sigma * normal);
      length = std::clamp(static_cast<std::int64_t>(std::llround(std::min(value, 9.0e18))), min_length, max_length);
    }
  } else if (kind == "uniform") {
    const auto span = static_cast<std::uint64_t>(max_length - min_length + 1);
    for (std::int64_t& length : lengths) length = min_length + static_cast<std::int64_t>(uniform_below(engine, span));
  } else {
    STRIDER_THROW(UsageError,
                  "lengths '" + spec + "': unknown distribution '" + kind + "' (known: lognormal, uniform)");
  }
  return lengths;
}

}  // namespace strider
