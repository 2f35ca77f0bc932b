// reel._reel: the C++ half of the Python package `reel` (python/reel/ is the other half, which
// checks argument types and shapes results for Python users). See docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "array_source.h"
#include "data.h"
#include "host.h"
#include "inmemory.h"
#include "reel/core/metrics.h"
#include "reel/version.h"
#include "train.h"

namespace py = pybind11;

namespace reel::python {
namespace {

// GAP@k, Hit@1, PERR and mAP of `scores` [N, C] against the indicator matrix `labels` [N, C], by
// the core's accumulator (docs/metrics.md).
py::dict Metrics(py::array_t<float, py::array::c_style | py::array::forcecast> scores,
                 py::array_t<uint8_t, py::array::c_style | py::array::forcecast> labels, int k) {
  if (scores.ndim() != 2 || labels.ndim() != 2 || scores.shape(0) != labels.shape(0) ||
      scores.shape(1) != labels.shape(1))
    ThrowIfError(InvalidArgumentError("scores and labels must both be [videos, classes]"));
  if (k < 1) ThrowIfError(InvalidArgumentError("k must be >= 1, got " + std::to_string(k)));
  const int64_t n = scores.shape(0), c = scores.shape(1);
  core::MetricsAccumulator acc(c, k);
  std::vector<int32_t> positive;
  for (int64_t v = 0; v < n; ++v) {
    positive.clear();
    for (int64_t j = 0; j < c; ++j)
      if (labels.at(v, j)) positive.push_back(static_cast<int32_t>(j));
    ThrowIfError(acc.AddVideo({scores.data(v, 0), static_cast<size_t>(c)}, positive)
                     .WithContext("scores row " + std::to_string(v)));
  }
  return MetricsDict(acc.Compute());
}

// reel.sklearn's training data: X [N, D] (feature "x") and the indicator matrix Y [N, C], copied.
int64_t AddArrays(py::array_t<float, py::array::c_style | py::array::forcecast> x,
                  py::array_t<uint8_t, py::array::c_style | py::array::forcecast> y) {
  if (x.ndim() != 2 || y.ndim() != 2 || x.shape(0) != y.shape(0))
    ThrowIfError(InvalidArgumentError("X must be [videos, features] and Y [videos, classes]"));
  auto values = std::make_shared<std::vector<float>>(x.data(), x.data() + x.size());
  ArrayTable t;
  t.rows = x.shape(0);
  ArrayFeature f;
  f.name = "x";
  f.width = x.shape(1);
  for (int64_t v = 0; v < t.rows; ++v) {
    f.frames.push_back(values->data() + v * f.width);
    f.lengths.push_back(1);
    for (int64_t c = 0; c < y.shape(1); ++c)
      if (y.at(v, c)) t.label_ids.push_back(static_cast<int32_t>(c));
    t.label_offsets.push_back(static_cast<int64_t>(t.label_ids.size()));
  }
  t.features.push_back(std::move(f));
  t.keep = std::move(values);
  return AddArrayTable(std::move(t));
}

py::list Plugins() {
  py::list out;
  for (const core::LoadedPlugin& p : GetHost().plugins().loaded()) {
    py::dict d;
    d["name"] = p.name;
    d["version"] = p.version;
    d["path"] = p.path;
    d["components"] = p.components;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace reel::python

PYBIND11_MODULE(_reel, m) {
  using namespace reel::python;
  m.doc() = "reel's core from Python (use the package `reel`, not this module)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object error = py::module_::import("reel.errors").attr("from_status")(e.code(), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    }
  });
  m.attr("sdk_version") = REEL_SDK_VERSION;
  m.def(
      "configure",
      [](const std::vector<std::string>& plugin_dirs) {
        if (HostCreated())
          ThrowIfError(reel::FailedPreconditionError(
              "reel.configure must come before the first use of reel (the plugins are loaded)"));
        GetHost(plugin_dirs);
      },
      py::arg("plugin_dirs"));
  m.def("plugins", &Plugins);
  m.def("add_arrays", &AddArrays, py::arg("x"), py::arg("y"));
  m.def("drop_arrays", &DropArrayTable, py::arg("handle"));
  m.def("metrics", &Metrics, py::arg("scores"), py::arg("labels"), py::arg("k"));
  DefineData(m);
  DefineInMemory(m);
  DefineTrain(m);
}
