#pragma once
/// \file
/// Move-only owners of HDF5 identifiers (files, datasets, dataspaces, datatypes, property lists),
/// and STRIDER_H5_CHECK, the one checked-call macro for every H5* call: a negative return throws
/// Hdf5Error with the call text, file:line, the rank, the return code and a hint that ends with the
/// innermost message of HDF5's own error stack ("... : unable to open file: name = 'x.h5'").
///
/// HDF5's automatic error printing is switched off by silence_hdf5_errors() (called by open_reader
/// and by the apps), so a failure prints one strider line, not a page of HDF5 stack.

#include <hdf5.h>

#include <string>

#include "strider/core/element_type.hpp"
#include "strider/core/error.hpp"
#include "strider/core/unique_handle.hpp"

namespace strider {

/// The native HDF5 memory type of an element type: a predefined id, or for float16 IEEE binary16 in
/// the native byte order (created on first use and kept for the process). Never close it. Not
/// collective; thread-safe after the first float16 call.
hid_t native_hdf5_type(ElementType type);

namespace detail {
/// Traits for UniqueHandle over hid_t; Close is the matching H5*close function.
template <herr_t (*Close)(hid_t)>
struct Hdf5HandleTraits {
  using handle_type = hid_t;
  static hid_t null() noexcept { return H5I_INVALID_HID; }
  static void release(hid_t id) noexcept {
    if (id >= 0) (void)Close(id);  // destructors never throw; a failed close is not actionable here
  }
};

/// Throws Hdf5Error for a failed HDF5 call (see STRIDER_H5_CHECK). Reads and clears HDF5's error stack.
[[noreturn]] void throw_hdf5_error(long long code, const char* call, const char* file, int line,
                                   const std::string& hint);
}  // namespace detail

/// An open HDF5 file (H5Fclose; with the MPI-IO driver, closing is collective).
using H5File = UniqueHandle<detail::Hdf5HandleTraits<H5Fclose>>;
/// An open dataset (H5Dclose).
using H5Dataset = UniqueHandle<detail::Hdf5HandleTraits<H5Dclose>>;
/// A dataspace (H5Sclose).
using H5Dataspace = UniqueHandle<detail::Hdf5HandleTraits<H5Sclose>>;
/// A datatype (H5Tclose). Do not wrap predefined types such as H5T_NATIVE_FLOAT.
using H5Datatype = UniqueHandle<detail::Hdf5HandleTraits<H5Tclose>>;
/// A property list (H5Pclose).
using H5PropertyList = UniqueHandle<detail::Hdf5HandleTraits<H5Pclose>>;
/// An attribute (H5Aclose).
using H5Attribute = UniqueHandle<detail::Hdf5HandleTraits<H5Aclose>>;

/// Switches off HDF5's automatic printing of its error stack (process-wide; idempotent). strider
/// reports HDF5 failures through Hdf5Error instead.
void silence_hdf5_errors() noexcept;

/// The HDF5 strider was built with, as --version names it: "HDF5 1.10.8 (parallel)".
std::string hdf5_build_version();

}  // namespace strider

/// Evaluates an H5* call and returns its value; throws strider::Hdf5Error when it is negative.
/// `hint` (a std::string expression, evaluated only on failure) says what was being done:
///   hid_t file = STRIDER_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "opening " + path);
#define STRIDER_H5_CHECK(call, hint)                                                                            \
  ([&]() {                                                                                                      \
    const auto strider_h5_value_ = (call);                                                                      \
    if (strider_h5_value_ < 0)                                                                                  \
      ::strider::detail::throw_hdf5_error(static_cast<long long>(strider_h5_value_), #call,                     \
                                          ::strider::detail::relative_source_path(__FILE__), __LINE__, (hint)); \
    return strider_h5_value_;                                                                                   \
  }())
