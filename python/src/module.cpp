// The extension module strider._strider; the package strider (python/strider/) re-exports it.
#include "bindings.hpp"
#include "strider/config.hpp"
#include "strider/core/log.hpp"

PYBIND11_MODULE(_strider, module) {
  module.doc() = "strider's C++ pipeline for Python; import strider, not this module.";
  module.attr("__version__") = STRIDER_VERSION_STRING;  // the C++ project's version
  strider::python::bind_errors(module);
  strider::python::bind_runtime(module);
  strider::python::bind_options(module);
  strider::python::bind_loader(module);
  strider::python::bind_plan(module);
}
