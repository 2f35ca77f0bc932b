#include "data.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "host.h"
#include "reel/batch.h"
#include "reel/data_source.h"

namespace py = pybind11;

namespace reel::python {
namespace {

// A batch shared by the arrays that view it: its tensors (a TensorPool's storage) go back to the
// source's pool when the last array is collected.
py::capsule Owner(std::shared_ptr<Batch> batch) {
  return py::capsule(new std::shared_ptr<Batch>(std::move(batch)),
                     [](void* p) { delete static_cast<std::shared_ptr<Batch>*>(p); });
}

template <typename T>
py::array View(const T* data, std::vector<py::ssize_t> shape, const py::capsule& owner) {
  return py::array_t<T>(std::move(shape), data, owner);
}

// The data source named `source` with `options` (all strings, as a config's), one reader of one,
// seed 0; the first batch is not read yet.
core::Owned<DataSource> OpenSource(const std::string& source,
                                   const std::map<std::string, std::string>& options) {
  core::Host& host = GetHost();
  if (auto it = options.find("files"); it != options.end()) {
    // As `reel eval` does: a pattern that matches nothing is NotFound naming it.
    std::string rest = it->second;
    for (size_t start = 0; start <= rest.size();) {
      size_t comma = rest.find(',', start);
      if (comma == std::string::npos) comma = rest.size();
      const std::string p = rest.substr(start, comma - start);
      start = comma + 1;
      if (p.empty()) continue;
      Storage* storage = ValueOrThrow(host.ForUri(p));
      if (ValueOrThrow(storage->Glob(p)).empty())
        ThrowIfError(NotFoundError("data pattern '" + p + "' matches no file"));
    }
  }
  DataSourceContext ctx{ShardSpec{}, 0, &host};
  return ValueOrThrow(host.registry().CreateDataSource(source, options, ctx));
}

// Yields the source's batches; `per_record` splits each into one dict per video.
class Reader {
 public:
  Reader(const std::string& source, const std::map<std::string, std::string>& options,
         bool per_record, bool video_level)
      : source_(OpenSource(source, options)), per_record_(per_record), video_level_(video_level) {}

  py::dict Next() {
    if (per_record_ && batch_ && index_ < batch_->size()) return Record(index_++);
    Result<Batch> next = [&] {
      py::gil_scoped_release release;
      return source_->Next();
    }();
    if (!next.ok() && next.status().code() == StatusCode::kOutOfRange) throw py::stop_iteration();
    batch_ = std::make_shared<Batch>(ValueOrThrow(std::move(next)));
    owner_ = Owner(batch_);
    index_ = 0;
    if (per_record_) return Next();
    return WholeBatch();
  }

  py::dict Stats() const {
    DataStats s = source_->stats();
    py::dict d;
    d["records"] = s.records;
    d["skipped_corrupt"] = s.skipped_corrupt;
    d["bytes"] = s.bytes;
    return d;
  }

 private:
  py::dict Record(int64_t b) {
    py::dict d;
    d["id"] = batch_->ids[static_cast<size_t>(b)];
    std::span<const int32_t> labels = batch_->labels(b);
    d["labels"] = View(labels.data(), {static_cast<py::ssize_t>(labels.size())}, owner_);
    for (const auto& [name, f] : batch_->features) {
      const int64_t t = f.values.dim(1), w = f.values.dim(2);
      const float* row = f.values.data() + b * t * w;
      if (video_level_)
        d[py::str(name)] = View(row, {w}, owner_);
      else
        d[py::str(name)] = View(row, {f.lengths[static_cast<size_t>(b)], w}, owner_);
    }
    return d;
  }

  py::dict WholeBatch() {
    py::dict d, lengths;
    py::list ids;
    for (const std::string& id : batch_->ids) ids.append(id);
    d["id"] = ids;
    for (const auto& [name, f] : batch_->features) {
      d[py::str(name)] =
          View(f.values.data(), {f.values.dim(0), f.values.dim(1), f.values.dim(2)}, owner_);
      lengths[py::str(name)] =
          View(f.lengths.data(), {static_cast<py::ssize_t>(f.lengths.size())}, owner_);
    }
    d["lengths"] = lengths;
    d["label_offsets"] = View(batch_->label_offsets.data(),
                              {static_cast<py::ssize_t>(batch_->label_offsets.size())}, owner_);
    d["label_ids"] = View(batch_->label_ids.data(),
                          {static_cast<py::ssize_t>(batch_->label_ids.size())}, owner_);
    return d;
  }

  core::Owned<DataSource> source_;
  bool per_record_, video_level_;
  std::shared_ptr<Batch> batch_;
  py::capsule owner_;
  int64_t index_ = 0;
};

}  // namespace

void DefineData(py::module_& m) {
  py::class_<Reader>(m, "Reader",
                     "Batches (or single records) of a registered data source as NumPy arrays.")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, bool, bool>(),
           py::arg("source"), py::arg("options"), py::arg("per_record"), py::arg("video_level"))
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Reader::Next)
      .def("stats", &Reader::Stats, "Records read, corrupt records skipped and bytes consumed.");
}

}  // namespace reel::python
