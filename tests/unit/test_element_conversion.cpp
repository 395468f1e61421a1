// The element conversion on the CPU against references written here: float16 from its closed form
// (sign, exponent, mantissa), rounding to float16 by searching the nearest float16 value, integer
// and float64 conversions from literal powers of two, and (x - mean) / stddev per feature and per
// channel from explicit index loops over the sample's shape.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "strider/core/error.hpp"
#include "strider/device/element_conversion.hpp"

using namespace strider;

namespace {

constexpr float infinity = std::numeric_limits<float>::infinity();

// The value of a binary16 from its fields: (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 m/1024.
double reference_half_value(std::uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 31;
  const int mantissa = bits & 1023;
  double magnitude = 0.0;
  if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
  }
  return sign != 0 ? -magnitude : magnitude;
}

// The binary16 nearest to x (ties to the even bit pattern): the non-negative finite binary16 bit
// patterns 0x0000..0x7bff increase with their values, so a binary search over them finds the two
// neighbours. At or beyond 65520 (half way from 65504 to the next power, 65536) it is infinity.
std::uint16_t reference_to_half(double x) {
  if (std::isnan(x)) return 0x7e00;
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  if (magnitude >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00);
  int low = 0, high = 0x7bff;  // largest pattern whose value is <= magnitude
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (reference_half_value(static_cast<std::uint16_t>(middle)) <= magnitude)
      low = middle;
    else
      high = middle - 1;
  }
  int best = low;  // 0x7bff (65504) up to 65520
  if (low < 0x7bff) {
    const double below = magnitude - reference_half_value(static_cast<std::uint16_t>(low));
    const double above = reference_half_value(static_cast<std::uint16_t>(low + 1)) - magnitude;
    if (above < below || (above == below && (low + 1) % 2 == 0)) best = low + 1;
  }
  return static_cast<std::uint16_t>(sign | best);
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> convert_to_floats(const ElementConversion& conversion, const std::vector<std::byte>& in,
                                     std::int64_t rows) {
  REQUIRE(conversion.output_type() == ElementType::float32);
  std::vector<float> out(static_cast<std::size_t>(rows * conversion.features()));
  conversion.convert(in.data(), rows, reinterpret_cast<std::byte*>(out.data()));
  return out;
}

std::vector<std::uint16_t> convert_to_halves(const ElementConversion& conversion, const std::vector<std::byte>& in,
                                             std::int64_t rows) {
  REQUIRE(conversion.output_type() == ElementType::float16);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * conversion.features()));
  conversion.convert(in.data(), rows, reinterpret_cast<std::byte*>(out.data()));
  return out;
}

ConversionOptions to(ElementType output) {
  return ConversionOptions{output, std::nullopt};
}

ConversionOptions normalized(ElementType output, StatisticsLayout layout, std::vector<float> mean,
                             std::vector<float> stddev) {
  return ConversionOptions{output, Normalization{layout, std::move(mean), std::move(stddev)}};
}

// Values equal, with NaN equal to NaN and the sign of zero compared.
void check_same_value(float actual, double expected) {
  INFO("actual " << actual << ", expected " << expected);
  if (std::isnan(expected)) {
    CHECK(std::isnan(actual));
  } else {
    CHECK(static_cast<double>(actual) == expected);
    CHECK(std::signbit(actual) == std::signbit(expected));
  }
}

// Distance in units in the last place of float32 around `expected`.
double ulps_from(float actual, double expected) {
  const float nearest = static_cast<float>(expected);
  const double ulp = static_cast<double>(std::nextafter(std::fabs(nearest), infinity) - std::fabs(nearest));
  return std::fabs(static_cast<double>(actual) - expected) / ulp;
}

}  // namespace

TEST_CASE("float16 to float32: all 65536 values equal their closed form", "[conversion][float16]") {
  int nans = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const double expected = reference_half_value(half);
    const float actual = float16_to_float32(half);
    if (std::isnan(expected)) {
      ++nans;
      REQUIRE(std::isnan(actual));
    } else if (static_cast<double>(actual) != expected || std::signbit(actual) != std::signbit(expected)) {
      FAIL("float16 0x" << std::hex << bits << ": got " << actual << ", expected " << expected);
    }
  }
  CHECK(nans == 2 * 1023);
  // The extremes, spelled out: the largest value, the smallest normal and subnormal, infinity.
  CHECK(float16_to_float32(0x7bff) == 65504.0f);
  CHECK(float16_to_float32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(float16_to_float32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(float16_to_float32(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(float16_to_float32(0x7c00) == infinity);
  CHECK(float16_to_float32(0xfc00) == -infinity);
  CHECK(std::isnan(float16_to_float32(0x7d00)));  // a signaling NaN stays NaN
}

TEST_CASE("float32 to float16 rounds to nearest, ties to even, overflow to infinity", "[conversion][float16]") {
  // Every finite value round-trips.
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    if ((half & 0x7c00) == 0x7c00) continue;
    const std::uint16_t back = float32_to_float16(static_cast<float>(reference_half_value(half)));
    if (back != half) FAIL("float16 0x" << std::hex << bits << " came back as 0x" << back);
  }
  // Midpoints between neighbours (exact in float32: 12 significant bits) go to the even pattern;
  // one float32 step either side goes to the nearer neighbour.
  for (std::uint32_t low = 0; low < 0x7bff; ++low) {
    const double a = reference_half_value(static_cast<std::uint16_t>(low));
    const double b = reference_half_value(static_cast<std::uint16_t>(low + 1));
    const auto middle = static_cast<float>((a + b) / 2);
    REQUIRE(static_cast<double>(middle) == (a + b) / 2);
    const std::uint16_t even = static_cast<std::uint16_t>(low % 2 == 0 ? low : low + 1);
    const std::uint16_t below = float32_to_float16(std::nextafter(middle, 0.0f));
    const std::uint16_t above = float32_to_float16(std::nextafter(middle, infinity));
    if (float32_to_float16(middle) != even || below != low || above != low + 1 ||
        float32_to_float16(-middle) != (0x8000 | even)) {
      FAIL("around the midpoint of float16 0x" << std::hex << low << " and 0x" << low + 1);
    }
  }
  // The edges, spelled out.
  CHECK(float32_to_float16(65504.0f) == 0x7bff);
  CHECK(float32_to_float16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(float32_to_float16(65520.0f) == 0x7c00);
  CHECK(float32_to_float16(-1e10f) == 0xfc00);
  CHECK(float32_to_float16(infinity) == 0x7c00);
  CHECK(float32_to_float16(-infinity) == 0xfc00);
  CHECK(float32_to_float16(std::ldexp(1.0f, -25)) == 0x0000);  // a tie between 0 and 2^-24
  CHECK(float32_to_float16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(float32_to_float16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 * 2^-24: a tie, to even
  CHECK(float32_to_float16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(float32_to_float16(-0.0f) == 0x8000);
  const std::uint16_t nan = float32_to_float16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  // Values across the whole float32 range against the nearest-value search.
  std::uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 1664525u + 1013904223u;
    float value;
    std::memcpy(&value, &state, sizeof(value));
    if (std::isnan(value)) continue;
    const std::uint16_t expected = reference_to_half(static_cast<double>(value));
    if (float32_to_float16(value) != expected)
      FAIL("float32 " << value << ": expected float16 0x" << std::hex << expected);
  }
}

TEST_CASE("every element type converts to float32, rounding to nearest even", "[conversion]") {
  auto check_type = [](ElementType type, std::vector<std::byte> in, std::vector<double> expected) {
    INFO(element_name(type));
    const ElementConversion conversion(type, static_cast<std::int64_t>(expected.size()), to(ElementType::float32));
    CHECK(conversion.converts() == (type != ElementType::float32));
    const std::vector<float> out = convert_to_floats(conversion, in, 1);
    for (std::size_t i = 0; i < expected.size(); ++i) check_same_value(out[i], expected[i]);
  };
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  check_type(ElementType::int8, bytes_of<std::int8_t>({-128, -1, 0, 127}), {-128, -1, 0, 127});
  check_type(ElementType::uint8, bytes_of<std::uint8_t>({0, 1, 200, 255}), {0, 1, 200, 255});
  check_type(ElementType::int16, bytes_of<std::int16_t>({-32768, -7, 32767}), {-32768, -7, 32767});
  check_type(ElementType::uint16, bytes_of<std::uint16_t>({0, 65535}), {0, 65535});
  // 2^24 + 1 is a tie (to 2^24), 2^24 + 3 too (to 2^24 + 4); 2^31 - 1 rounds up to 2^31.
  check_type(ElementType::int32, bytes_of<std::int32_t>({16777217, 16777219, -16777217, 2147483647, -2147483647 - 1}),
             {16777216, 16777220, -16777216, 2147483648.0, -2147483648.0});
  check_type(ElementType::uint32, bytes_of<std::uint32_t>({4294967295u, 16777217u}), {4294967296.0, 16777216});
  check_type(ElementType::int64,
             bytes_of<std::int64_t>({std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                                     (std::int64_t{1} << 53) + 1}),
             {-std::ldexp(1.0, 63), std::ldexp(1.0, 63), std::ldexp(1.0, 53)});
  check_type(ElementType::uint64, bytes_of<std::uint64_t>({std::numeric_limits<std::uint64_t>::max(), 3}),
             {std::ldexp(1.0, 64), 3});
  check_type(ElementType::float32, bytes_of<float>({1.5f, -0.0f, static_cast<float>(inf), static_cast<float>(nan)}),
             {1.5, -0.0, inf, nan});
  // float64: beyond float32's range to infinity, below its smallest subnormal to zero, 1/3 rounded.
  check_type(ElementType::float64, bytes_of<double>({1e300, -1e300, 1e-50, -1e-50, 1.0 / 3.0, nan, -inf}),
             {inf, -inf, 0.0, -0.0, 11184811.0 / 33554432.0, nan, -inf});
  check_type(ElementType::float16, bytes_of<std::uint16_t>({0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0xfe00}),
             {1.0, -2.0, std::ldexp(1.0, -24), 65504.0, inf, nan});
}

TEST_CASE("without an output type, convert copies the stored bytes at any alignment", "[conversion]") {
  const ElementConversion conversion(ElementType::int16, 3, ConversionOptions{});
  CHECK_FALSE(conversion.converts());
  CHECK(conversion.output_type() == ElementType::int16);
  const std::vector<std::byte> in = bytes_of<std::int16_t>({1, -2, 3, -4, 5, -6});
  std::vector<std::byte> shifted_in(in.size() + 1), out(in.size() + 1);
  std::memcpy(shifted_in.data() + 1, in.data(), in.size());
  conversion.convert(shifted_in.data() + 1, 2, out.data() + 1);
  CHECK(std::memcmp(out.data() + 1, in.data(), in.size()) == 0);

  // A conversion reads and writes unaligned elements too.
  const ElementConversion to_float(ElementType::int16, 3, to(ElementType::float32));
  std::vector<std::byte> floats(6 * sizeof(float) + 1);
  to_float.convert(shifted_in.data() + 1, 2, floats.data() + 1);
  for (int i = 0; i < 6; ++i) {
    float value;
    std::memcpy(&value, floats.data() + 1 + i * 4, 4);
    CHECK(value == static_cast<float>((i % 2 == 0 ? 1 : -1) * (i + 1)));
  }
}

TEST_CASE("per-feature normalization: (x - mean[f]) / stddev[f] for every element type", "[conversion][normalize]") {
  // 3 samples of 5 features; x = 10 * (row + 1) + f; mean[f] = 4 f; stddev[f] = 2^(f - 2). Every
  // value is a small integer over a power of two, so the exact quotient is the expected float.
  constexpr std::int64_t rows = 3, features = 5;
  const std::vector<float> mean{0, 4, 8, 12, 16};
  const std::vector<float> stddev{0.25f, 0.5f, 1, 2, 4};
  std::vector<double> expected;
  std::vector<double> values;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t f = 0; f < features; ++f) {
      const double x = static_cast<double>(10 * (row + 1) + f);
      values.push_back(x);
      expected.push_back((x - mean[static_cast<std::size_t>(f)]) / stddev[static_cast<std::size_t>(f)]);
    }
  }
  auto check_type = [&](ElementType type, const std::vector<std::byte>& in) {
    INFO(element_name(type));
    const ElementConversion conversion(type, features,
                                       normalized(ElementType::float32, StatisticsLayout::per_feature, mean, stddev));
    REQUIRE(conversion.normalizes());
    const std::vector<float> out = convert_to_floats(conversion, in, rows);
    for (std::size_t i = 0; i < expected.size(); ++i) check_same_value(out[i], expected[i]);
  };
  auto as = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> typed;
    for (double x : values) typed.push_back(static_cast<T>(x));
    return bytes_of(typed);
  };
  check_type(ElementType::int8, as(std::int8_t{}));
  check_type(ElementType::uint8, as(std::uint8_t{}));
  check_type(ElementType::int16, as(std::int16_t{}));
  check_type(ElementType::uint16, as(std::uint16_t{}));
  check_type(ElementType::int32, as(std::int32_t{}));
  check_type(ElementType::uint32, as(std::uint32_t{}));
  check_type(ElementType::int64, as(std::int64_t{}));
  check_type(ElementType::uint64, as(std::uint64_t{}));
  check_type(ElementType::float32, as(float{}));
  check_type(ElementType::float64, as(double{}));
  std::vector<std::uint16_t> halves;
  for (double x : values) halves.push_back(reference_to_half(x));  // small integers: exact
  check_type(ElementType::float16, bytes_of(halves));
}

TEST_CASE("normalization with statistics that do not divide exactly stays within 2 ulp", "[conversion][normalize]") {
  // float32 samples, mean 0.1 and stddev 3 (neither exact in binary): the float32 result is the
  // rounded difference, rounded again after the division, so at most about 2 ulp from the exact
  // quotient of the float32 operands (computed in double).
  constexpr std::int64_t count = 4096;
  std::vector<float> values(count);
  std::uint32_t state = 7;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state % 2000001) / 1000.0f - 1000.0f;
  }
  const ElementConversion conversion(ElementType::float32, 1,
                                     normalized(ElementType::float32, StatisticsLayout::per_feature, {0.1f}, {3.0f}));
  const std::vector<float> out = convert_to_floats(conversion, bytes_of(values), count);
  double worst = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double exact = (static_cast<double>(values[i]) - static_cast<double>(0.1f)) / 3.0;
    worst = std::max(worst, ulps_from(out[i], exact));
  }
  INFO("worst distance " << worst << " ulp");
  CHECK(worst <= 2.0);
}

TEST_CASE("per-channel normalization, channels first and last, of several sample shapes", "[conversion][normalize]") {
  struct Shape {
    std::int64_t channels;
    std::vector<std::int64_t> spatial;  // the other dimensions of a sample
  };
  const std::vector<Shape> shapes{{3, {2, 2}}, {4, {5}}, {1, {3, 2}}, {6, {}}, {2, {1, 3, 2}}};
  for (const Shape& shape : shapes) {
    std::int64_t inner = 1;
    for (std::int64_t extent : shape.spatial) inner *= extent;
    const std::int64_t features = shape.channels * inner;
    std::vector<float> mean, stddev;
    for (std::int64_t c = 0; c < shape.channels; ++c) {
      mean.push_back(static_cast<float>(10 * c + 1));
      stddev.push_back(std::ldexp(1.0f, static_cast<int>(c % 3) - 1));
    }
    constexpr std::int64_t rows = 2;
    std::vector<std::int32_t> samples(static_cast<std::size_t>(rows * features));
    for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<std::int32_t>(7 * i) - 50;

    for (StatisticsLayout layout : {StatisticsLayout::channels_first, StatisticsLayout::channels_last}) {
      INFO("channels " << shape.channels << " x " << inner << " elements, " << statistics_layout_name(layout));
      // The expected values by walking the sample's index space: [C, inner] channels first,
      // [inner, C] channels last.
      std::vector<double> expected(samples.size());
      for (std::int64_t row = 0; row < rows; ++row) {
        for (std::int64_t c = 0; c < shape.channels; ++c) {
          for (std::int64_t j = 0; j < inner; ++j) {
            const std::int64_t f = layout == StatisticsLayout::channels_first ? c * inner + j : j * shape.channels + c;
            const std::size_t i = static_cast<std::size_t>(row * features + f);
            expected[i] = (samples[i] - static_cast<double>(mean[static_cast<std::size_t>(c)])) /
                          stddev[static_cast<std::size_t>(c)];
          }
        }
      }
      const ElementConversion conversion(ElementType::int32, features,
                                         normalized(ElementType::float32, layout, mean, stddev));
      const std::vector<float> out = convert_to_floats(conversion, bytes_of(samples), rows);
      for (std::size_t i = 0; i < expected.size(); ++i) check_same_value(out[i], expected[i]);
    }
  }
}

TEST_CASE("per-channel statistics with one channel per feature equal per-feature ones", "[conversion][normalize]") {
  const std::vector<float> mean{1, 2, 3, 4}, stddev{2, 4, 8, 16};
  const ElementConversion per_feature(ElementType::uint8, 4,
                                      normalized(ElementType::float32, StatisticsLayout::per_feature, mean, stddev));
  for (StatisticsLayout layout : {StatisticsLayout::channels_first, StatisticsLayout::channels_last}) {
    const ElementConversion per_channel(ElementType::uint8, 4, normalized(ElementType::float32, layout, mean, stddev));
    CHECK(per_channel.feature_means() == per_feature.feature_means());
    CHECK(per_channel.feature_stddevs() == per_feature.feature_stddevs());
  }
}

TEST_CASE("NaN and infinities pass through normalization as IEEE 754 says", "[conversion][normalize]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // float32 in, mean 1, stddev 0.5: x - 1 then / 0.5; 3e38 / 0.5 overflows to infinity.
  const std::vector<float> values{
      static_cast<float>(nan), static_cast<float>(inf), static_cast<float>(-inf), -0.0f, 3e38f, 1.0f};
  const ElementConversion conversion(ElementType::float32, 1,
                                     normalized(ElementType::float32, StatisticsLayout::per_feature, {1.0f}, {0.5f}));
  const std::vector<float> out = convert_to_floats(conversion, bytes_of(values), 6);
  check_same_value(out[0], nan);
  check_same_value(out[1], inf);
  check_same_value(out[2], -inf);
  check_same_value(out[3], -2.0);
  check_same_value(out[4], inf);
  check_same_value(out[5], 0.0);  // 1 - 1 is +0 in round to nearest

  // float16 in: subnormals, infinities and NaN, mean 0 and stddev 2^-10.
  const std::vector<std::uint16_t> halves{0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e01, 0x0000};
  const ElementConversion from_half(
      ElementType::float16, 1,
      normalized(ElementType::float32, StatisticsLayout::per_feature, {0.0f}, {std::ldexp(1.0f, -10)}));
  const std::vector<float> scaled = convert_to_floats(from_half, bytes_of(halves), 6);
  check_same_value(scaled[0], std::ldexp(1.0, -14));
  check_same_value(scaled[1], -1023 * std::ldexp(1.0, -14));
  check_same_value(scaled[2], inf);
  check_same_value(scaled[3], -inf);
  check_same_value(scaled[4], nan);
  check_same_value(scaled[5], 0.0);
}

TEST_CASE("float16 output: normalized uint8 images and float64 values rounded twice", "[conversion][float16]") {
  // uint8 pixels, (x - 127.5) / 64: every quotient has at most 9 significant bits (exact in float16).
  std::vector<std::uint8_t> pixels;
  for (int x = 0; x < 256; ++x) pixels.push_back(static_cast<std::uint8_t>(x));
  const ElementConversion image(ElementType::uint8, 256,
                                normalized(ElementType::float16, StatisticsLayout::per_feature,
                                           std::vector<float>(256, 127.5f), std::vector<float>(256, 64.0f)));
  const std::vector<std::uint16_t> out = convert_to_halves(image, bytes_of(pixels), 1);
  for (int x = 0; x < 256; ++x) {
    INFO("pixel " << x);
    CHECK(out[static_cast<std::size_t>(x)] == reference_to_half((x - 127.5) / 64.0));
  }

  // float64 to float16 rounds to float32 first, then to float16 (the order the module documents).
  const std::vector<double> values{65519.0,
                                   65520.0,
                                   -65520.0,
                                   1e-8,
                                   3e-8,
                                   1.0 + std::ldexp(1.0, -11) + 1e-12,
                                   std::numeric_limits<double>::quiet_NaN()};
  const ElementConversion narrow(ElementType::float64, static_cast<std::int64_t>(values.size()),
                                 to(ElementType::float16));
  const std::vector<std::uint16_t> halves = convert_to_halves(narrow, bytes_of(values), 1);
  CHECK(halves[0] == 0x7bff);  // 65519 < 65520: the largest finite value
  CHECK(halves[1] == 0x7c00);  // the tie at 65520 goes to infinity
  CHECK(halves[2] == 0xfc00);
  CHECK(halves[3] == 0x0000);  // 0.17 of the smallest subnormal
  CHECK(halves[4] == 0x0001);  // 0.503 of it
  CHECK(halves[5] == 0x3c00);  // 1 + 2^-11 + 1e-12 is 1 + 2^-11 in float32: a tie, to even (1.0)
  CHECK((halves[6] & 0x7c00) == 0x7c00);
  CHECK((halves[6] & 0x03ff) != 0);
}

TEST_CASE("bad conversion options are one-line usage errors naming the problem", "[conversion][errors]") {
  auto message_of = [](ElementType input, std::int64_t features, const ConversionOptions& options) {
    try {
      const ElementConversion conversion(input, features, options);
    } catch (const UsageError& error) {
      const std::string text = error.what();
      CHECK(text.find('\n') == std::string::npos);
      return text;
    }
    FAIL("no UsageError");
    return std::string();
  };
  using Catch::Matchers::Contains;
  const auto per_feature = StatisticsLayout::per_feature;
  CHECK_THAT(message_of(ElementType::uint8, 4, to(ElementType::int32)), Contains("float32 or float16, not to int32"));
  CHECK_THAT(message_of(ElementType::uint8, 4, ConversionOptions{std::nullopt, Normalization{per_feature, {1}, {1}}}),
             Contains("normalization needs a float output type"));
  CHECK_THAT(message_of(ElementType::uint8, 12, normalized(ElementType::float32, per_feature, {0, 0, 0}, {1, 1, 1})),
             Contains("one mean and one standard deviation per element of a sample (12), got 3"));
  CHECK_THAT(message_of(ElementType::uint8, 2, normalized(ElementType::float32, per_feature, {0, 0}, {1})),
             Contains("has 2 means but 1 standard deviation"));
  CHECK_THAT(
      message_of(ElementType::uint8, 12,
                 normalized(ElementType::float32, StatisticsLayout::channels_last, {0, 0, 0, 0, 0}, {1, 1, 1, 1, 1})),
      Contains("channels-last normalization with 5 channels does not fit samples of 12 elements"));
  CHECK_THAT(
      message_of(ElementType::uint8, 12, normalized(ElementType::float32, StatisticsLayout::channels_first, {}, {})),
      Contains("0 channels does not fit"));
  CHECK_THAT(message_of(ElementType::uint8, 2, normalized(ElementType::float16, per_feature, {0, 0}, {1, 0})),
             Contains("stddev[1] is 0: every standard deviation must be finite and positive"));
  CHECK_THAT(message_of(ElementType::uint8, 2, normalized(ElementType::float16, per_feature, {0, 0}, {1, -2})),
             Contains("stddev[1] is -2"));
  CHECK_THAT(message_of(ElementType::uint8, 1,
                        normalized(ElementType::float32, per_feature, {std::numeric_limits<float>::quiet_NaN()}, {1})),
             Contains("mean[0] is nan: every mean must be finite"));
  CHECK_THAT(message_of(ElementType::uint8, 1, normalized(ElementType::float32, per_feature, {0}, {infinity})),
             Contains("stddev[0] is inf"));
  CHECK_THAT(message_of(ElementType::uint8, 0, to(ElementType::float32)), Contains("at least one element per sample"));
}
