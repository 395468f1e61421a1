#include "keywords.hpp"

#include <Python.h>

#include <algorithm>

#include "strider/core/error.hpp"

namespace strider::python {

namespace {

std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

const char* python_type(OptionType type) {
  switch (type) {
    case OptionType::flag:
      return "bool";
    case OptionType::int32:
    case OptionType::int64:
      return "int";
    case OptionType::text:
      break;
  }
  return "str";
}

/// The type Python sees: --batch-size is text in the table (a count or "all") and an int here, 0
/// standing for "all" (the whole epoch as one batch).
OptionType python_option_type(const LoaderOption& option) {
  return option.name == "batch-size" ? OptionType::int64 : option.type;
}

/// A seed as torch takes one: any int in [-2**63, 2**64-1], as the int64 with the same 64 bits.
std::string seed_text(const py::int_& number) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow == 0) return std::to_string(value);
  if (overflow > 0) {
    const unsigned long long bits = PyLong_AsUnsignedLongLong(number.ptr());
    if (!PyErr_Occurred()) return std::to_string(static_cast<std::int64_t>(bits));
    PyErr_Clear();
  }
  STRIDER_THROW(UsageError, "seed must be in [-2**63, 2**64-1] (torch's range), got " +
                                py::str(py::handle(number)).cast<std::string>());
}

/// One item of a list given for a text option.
std::string list_item_text(const std::string& keyword, py::handle item) {
  if (PyUnicode_Check(item.ptr())) return item.cast<std::string>();
  if (PyFloat_Check(item.ptr())) return py::repr(item);  // the shortest text that reads back the same double
  if (PyIndex_Check(item.ptr()) && !PyBool_Check(item.ptr()))
    return py::str(py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr())));
  if (py::hasattr(item, "dtype") && py::hasattr(item, "item")) return list_item_text(keyword, item.attr("item")());
  STRIDER_THROW(UsageError, keyword + ": a list of numbers or str, got an item of type " + type_name(item));
}

std::string text_of(const LoaderOption& option, const std::string& keyword, py::handle value) {
  switch (python_option_type(option)) {
    case OptionType::flag:
      if (PyBool_Check(value.ptr()) || type_name(value) == "bool_")
        return PyObject_IsTrue(value.ptr()) ? "true" : "false";
      STRIDER_THROW(UsageError, keyword + " takes True or False, got " + type_name(value));
    case OptionType::int32:
    case OptionType::int64: {
      if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
        STRIDER_THROW(UsageError, keyword + " takes an int, got " + type_name(value));
      const auto number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
      if (!number) throw py::error_already_set();
      if (option.name == "seed") return seed_text(number);
      const std::string text = py::str(py::handle(number)).cast<std::string>();
      return option.name == "batch-size" && text == "0" ? "all" : text;
    }
    case OptionType::text:
      break;
  }
  // A NUL would end the text where C reads it (a path): refused, as Python's open() does.
  const auto without_nul = [&keyword](std::string text) {
    if (text.find('\0') != std::string::npos) STRIDER_THROW(UsageError, keyword + " has an embedded null character");
    return text;
  };
  if (PyUnicode_Check(value.ptr())) return without_nul(value.cast<std::string>());
  if (py::hasattr(value, "__fspath__")) return without_nul(py::str(py::module_::import("os").attr("fspath")(value)));
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    std::string text;
    for (py::handle item : value) text += (text.empty() ? "" : ",") + list_item_text(keyword, item);
    return text;
  }
  STRIDER_THROW(UsageError, keyword + " takes a str, got " + type_name(value));
}

}  // namespace

std::string keyword_of(std::string_view name) {
  std::string keyword(name);
  std::replace(keyword.begin(), keyword.end(), '-', '_');
  return keyword;
}

void set_options_from_keywords(LoaderOptions& options, const py::dict& keywords, std::string_view group) {
  const std::vector<LoaderOption>& table = loader_option_table();
  for (const auto& [key, value] : keywords) {
    const std::string keyword = py::str(key);
    const auto option = std::find_if(table.begin(), table.end(),
                                     [&](const LoaderOption& entry) { return keyword_of(entry.name) == keyword; });
    if (option == table.end() || (!group.empty() && option->group != group))
      STRIDER_THROW(UsageError,
                    "unknown keyword '" + keyword + "'" +
                        (group.empty() ? std::string(" (the options are strider.loader_options())")
                                       : " (the " + std::string(group) + " options of strider.loader_options())"));
    if (value.is_none()) continue;
    option->set(options, text_of(*option, keyword, value));
  }
}

py::object option_value(const LoaderOption& option, const std::string& text) {
  if (text.empty()) return py::none();
  if (option.name == "batch-size" && text == "all") return py::int_(0);
  switch (python_option_type(option)) {
    case OptionType::flag:
      return py::bool_(text == "true");
    case OptionType::int32:
    case OptionType::int64:
      return py::int_(static_cast<long long>(std::stoll(text)));
    case OptionType::text:
      break;
  }
  return py::str(text);
}

std::string keywords_doc(std::string_view group) {
  std::string doc;
  for (const LoaderOption& option : loader_option_table()) {
    if (!group.empty() && option.group != group) continue;
    const py::object value = option_value(option, option.default_text);
    doc += "    " + keyword_of(option.name) + " (" + python_type(python_option_type(option)) + ", default " +
           std::string(py::repr(value)) + "): " + option.help + "\n";
  }
  return doc;
}

void bind_options(py::module_& module) {
  module.def(
      "loader_options",
      [] {
        py::list options;
        for (const LoaderOption& option : loader_option_table()) {
          py::dict entry;
          entry["name"] = option.name;
          entry["keyword"] = keyword_of(option.name);
          entry["group"] = option.group;
          entry["type"] = python_type(python_option_type(option));
          entry["default"] = option_value(option, option.default_text);
          entry["help"] = option.help;
          options.append(entry);
        }
        return options;
      },
      "The options every app shares, as Loader keywords: dicts with name (--name), keyword (name with '_' "
      "for '-'), group, type (bool, int or str), default (None: unset) and help; read from the library's "
      "table, so that the apps' --help and the Loader agree.");
}

}  // namespace strider::python
