#include "inmemory.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "array_source.h"
#include "host.h"

namespace py = pybind11;

namespace reel::python {
namespace {

// Holds `o` (the caller's arrays) for as long as a table points into them; the last reference
// may go on a thread without the GIL, which is taken to release them.
std::shared_ptr<const void> KeepAlive(py::object o) {
  return std::shared_ptr<const void>(new py::object(std::move(o)), [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
}

template <typename T>
const T* Typed(const py::handle& h, const std::string& what, int64_t size) {
  if (!py::isinstance<py::array_t<T>>(h))
    ThrowIfError(InvalidArgumentError(what + ": not an array of the expected dtype"));
  auto a = py::reinterpret_borrow<py::array>(h);
  if (a.ndim() != 1 || a.shape(0) != size || !(a.flags() & py::array::c_style))
    ThrowIfError(InvalidArgumentError(what + ": want a contiguous [" + std::to_string(size) + "]"));
  return static_cast<const T*>(a.data());
}

// The arguments _inmemory.py lays out: rows; features, each (name, arrays [F_k, D] float32
// C-contiguous, which int64 [rows] or None (all in arrays[0]), starts int64 [rows], lengths
// int32 [rows]); label_offsets int64 [rows + 1]; label_ids int32; ids (list of str) or None.
ArrayTable ToTable(const py::tuple& t) {
  if (t.size() != 5) ThrowIfError(InvalidArgumentError("a table is 5 fields"));
  ArrayTable out;
  out.rows = t[0].cast<int64_t>();
  const auto rows = static_cast<size_t>(out.rows);
  for (const py::handle& f : t[1].cast<py::list>()) {
    auto spec = f.cast<py::tuple>();
    ArrayFeature a;
    a.name = spec[0].cast<std::string>();
    const std::string what = "feature '" + a.name + "'";
    std::vector<const float*> base;
    std::vector<int64_t> extent;
    for (const py::handle& h : spec[1].cast<py::list>()) {
      if (!py::isinstance<py::array_t<float>>(h))
        ThrowIfError(InvalidArgumentError(what + ": values must be float32"));
      auto v = py::reinterpret_borrow<py::array>(h);
      if (v.ndim() != 2 || !(v.flags() & py::array::c_style))
        ThrowIfError(InvalidArgumentError(what + ": values must be a contiguous [frames, D]"));
      if (base.empty()) a.width = v.shape(1);
      if (v.shape(1) != a.width)
        ThrowIfError(InvalidArgumentError(what + ": values of width " + std::to_string(v.shape(1)) +
                                          ", want " + std::to_string(a.width)));
      base.push_back(static_cast<const float*>(v.data()));
      extent.push_back(v.shape(0));
    }
    const int64_t* which = spec[2].is_none() ? nullptr : Typed<int64_t>(spec[2], what, out.rows);
    const int64_t* starts = Typed<int64_t>(spec[3], what, out.rows);
    const int32_t* lengths = Typed<int32_t>(spec[4], what, out.rows);
    for (size_t r = 0; r < rows; ++r) {
      const int64_t w = which ? which[r] : 0;
      if (w < 0 || w >= static_cast<int64_t>(base.size()) || starts[r] < 0 || lengths[r] < 1 ||
          starts[r] + lengths[r] > extent[static_cast<size_t>(w)])
        ThrowIfError(InvalidArgumentError(what + ": video " + std::to_string(r) +
                                          " lies outside its values"));
      a.frames.push_back(base[static_cast<size_t>(w)] + starts[r] * a.width);
      a.lengths.push_back(lengths[r]);
    }
    out.features.push_back(std::move(a));
  }
  const int64_t* offsets = Typed<int64_t>(t[2], "labels", out.rows + 1);
  out.label_offsets.assign(offsets, offsets + out.rows + 1);
  auto ids = py::reinterpret_borrow<py::array>(t[3]);
  if (!py::isinstance<py::array_t<int32_t>>(ids) || ids.ndim() != 1)
    ThrowIfError(InvalidArgumentError("labels: ids must be int32 [labels]"));
  const auto* id = static_cast<const int32_t*>(ids.data());
  out.label_ids.assign(id, id + ids.shape(0));
  if (!t[4].is_none()) out.ids = t[4].cast<std::vector<std::string>>();
  ThrowIfError(ValidateArrayTable(out));
  out.keep = KeepAlive(t);
  return out;
}

int64_t AddTable(const py::tuple& t) { return AddArrayTable(ToTable(t)); }

// `next(epoch, index)` returns a table's fields or None after the epoch's last batch; its
// exceptions are kept by _inmemory.py, which raises them again after the call.
int64_t AddStream(py::function next) {
  std::shared_ptr<py::object> fn(new py::object(std::move(next)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
  return AddArrayStream([fn](int64_t epoch, int64_t index) -> Result<ArrayTable> {
    py::gil_scoped_acquire gil;
    try {
      py::object r = (*fn)(epoch, index);
      if (r.is_none()) return OutOfRangeError("end of epoch");
      return ToTable(r.cast<py::tuple>());
    } catch (py::error_already_set& e) {
      return CancelledError(std::string("the data iterable raised: ") + e.what());
    } catch (const std::exception& e) {
      return InvalidArgumentError(e.what());
    }
  });
}

}  // namespace

void DefineInMemory(py::module_& m) {
  m.def("add_table", &AddTable, py::arg("table"));
  m.def("add_stream", &AddStream, py::arg("next"));
  m.def("table_count", &ArrayTableCount);
}

}  // namespace reel::python
