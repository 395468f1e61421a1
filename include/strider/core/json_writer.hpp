#pragma once
/// \file
/// A small streaming JSON writer for the apps' --json outputs and stats files (no parsing).

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace strider {

/// Writes compact JSON to a stream. Commas and quoting are handled; the caller opens and closes
/// objects and arrays in order. Not thread-safe.
///   JsonWriter json(std::cout);
///   json.begin_object(); json.key("rank"); json.value(3); json.end_object();
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view name);
  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  void value(bool flag);
  void value(double number);  ///< NaN and infinities are written as null
  void value(std::int64_t number);
  void value(int number) { value(static_cast<std::int64_t>(number)); }
  void value(std::uint64_t number);
  void null();
  /// An array of numbers in one call.
  template <typename T>
  void array(const std::vector<T>& values) {
    begin_array();
    for (const T& item : values) value(item);
    end_array();
  }
  /// key(name) then value(v).
  template <typename T>
  void field(std::string_view name, const T& v) {
    key(name);
    value(v);
  }

 private:
  void before_value();
  std::ostream& out_;
  std::vector<bool> first_in_scope_{true};
  bool after_key_ = false;
};

/// `text` quoted and escaped as a JSON string.
std::string json_quote(std::string_view text);

}  // namespace strider
