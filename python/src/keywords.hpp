#pragma once
/// \file
/// The shared option table (strider/pipeline/loader_options.hpp) as Python keyword arguments: an
/// option's keyword is its name with '_' for '-' (batch-size -> batch_size), its default and help
/// are the table's. Called with the GIL held.

#include <string>
#include <string_view>

#include "bindings.hpp"
#include "strider/pipeline/loader_options.hpp"

namespace strider::python {

/// The keyword of an option name: "batch-size" -> "batch_size".
std::string keyword_of(std::string_view name);

/// Sets `options` from keyword arguments named after the table's options. Values: bool for flags,
/// int for integers (the seed: any int in [-2**63, 2**64-1], as torch takes it; above 2**63-1 it
/// wraps to the same 64 bits), str for text (also an os.PathLike, or a list of numbers written
/// "a,b,c"); None keeps the default. `group`: only that group's options ("" any). Throws UsageError
/// naming the keyword for an unknown keyword or a value of the wrong type, and the table's
/// UsageError (naming --name) for a bad value.
void set_options_from_keywords(LoaderOptions& options, const py::dict& keywords, std::string_view group = "");

/// An option's value as Python has it (bool, int or str; None for unset) from the table's text.
py::object option_value(const LoaderOption& option, const std::string& text);

/// The options' keywords, types, defaults and help, one line each, for docstrings.
std::string keywords_doc(std::string_view group = "");

}  // namespace strider::python
