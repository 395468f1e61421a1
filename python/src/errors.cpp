// strider's errors as Python exceptions. strider.Error derives from RuntimeError, UsageError also
// from ValueError (what Python code catches for a bad argument), DataError from Error. The message
// is the line the apps print after "strider: error: " (error_message), and every instance carries:
//   kind          "usage", "data", "mpi", "hdf5", "system", "cuda", "nccl" or "other"
//   failing_rank  the rank whose error it is (an agreed error: the lowest failing rank), or None
//   ranks_agreed  how many ranks raised the same error (0: this rank alone)
#include <Python.h>

#include "bindings.hpp"
#include "strider/core/error.hpp"

namespace strider::python {

namespace {

PyObject* error_type = nullptr;
PyObject* usage_error_type = nullptr;
PyObject* data_error_type = nullptr;

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage:
      return "usage";
    case ErrorKind::data:
      return "data";
    case ErrorKind::mpi:
      return "mpi";
    case ErrorKind::hdf5:
      return "hdf5";
    case ErrorKind::system:
      return "system";
    case ErrorKind::cuda:
      return "cuda";
    case ErrorKind::nccl:
      return "nccl";
    case ErrorKind::other:
      break;
  }
  return "other";
}

/// Sets the Python error for a strider error (the GIL is held: pybind11 translates with it).
void raise_python_error(const Error& error) {
  const ErrorKind kind = error_kind(error);
  PyObject* type = kind == ErrorKind::usage ? usage_error_type : kind == ErrorKind::data ? data_error_type : error_type;
  py::object instance = py::reinterpret_borrow<py::object>(type)(error_message(error));
  instance.attr("kind") = kind_name(kind);
  if (const auto* agreed = dynamic_cast<const AgreedError*>(&error)) {
    instance.attr("failing_rank") = agreed->failing_rank();
    instance.attr("ranks_agreed") = agreed->ranks();
  } else if (error.context().rank >= 0) {
    instance.attr("failing_rank") = error.context().rank;
  }
  PyErr_SetObject(type, instance.ptr());
}

PyObject* new_exception_type(const char* name, const char* doc, PyObject* bases) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

}  // namespace

void bind_errors(py::module_& module) {
  error_type = new_exception_type("strider.Error",
                                  "A strider error; str() is the one-line message the apps print after "
                                  "'strider: error: '. Attributes: kind, failing_rank, ranks_agreed.",
                                  PyExc_RuntimeError);
  py::object base = py::reinterpret_borrow<py::object>(error_type);
  base.attr("kind") = "other";
  base.attr("failing_rank") = py::none();
  base.attr("ranks_agreed") = 0;
  py::tuple usage_bases = py::make_tuple(base, py::handle(PyExc_ValueError));
  usage_error_type = new_exception_type(
      "strider.UsageError", "Bad options, impossible combinations, unusable input files (also a ValueError).",
      usage_bases.ptr());
  data_error_type = new_exception_type("strider.DataError",
                                       "A file that is not what strider needs (shape, type, offsets).", error_type);
  module.attr("Error") = base;
  module.attr("UsageError") = py::reinterpret_borrow<py::object>(usage_error_type);
  module.attr("DataError") = py::reinterpret_borrow<py::object>(data_error_type);

  py::register_exception_translator([](std::exception_ptr failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const Error& error) {
      raise_python_error(error);
    }
  });
}

}  // namespace strider::python
