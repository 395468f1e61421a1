#include "strider/core/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace strider {

std::string json_quote(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      case '\r':
        quoted += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          quoted += escaped;
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_in_scope_.back()) out_ << ',';
  first_in_scope_.back() = false;
}

void JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  first_in_scope_.push_back(true);
}
void JsonWriter::end_object() {
  first_in_scope_.pop_back();
  out_ << '}';
}
void JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  first_in_scope_.push_back(true);
}
void JsonWriter::end_array() {
  first_in_scope_.pop_back();
  out_ << ']';
}
void JsonWriter::key(std::string_view name) {
  before_value();
  out_ << json_quote(name) << ':';
  after_key_ = true;
}
void JsonWriter::value(std::string_view text) {
  before_value();
  out_ << json_quote(text);
}
void JsonWriter::value(bool flag) {
  before_value();
  out_ << (flag ? "true" : "false");
}
void JsonWriter::value(double number) {
  before_value();
  if (!std::isfinite(number)) {
    out_ << "null";
    return;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", number);
  out_ << text;
}
void JsonWriter::value(std::int64_t number) {
  before_value();
  out_ << number;
}
void JsonWriter::value(std::uint64_t number) {
  before_value();
  out_ << number;
}
void JsonWriter::null() {
  before_value();
  out_ << "null";
}

}  // namespace strider
