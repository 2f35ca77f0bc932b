// read_tfrecords and batches: the registry's data source (the tfrecord plugin's, with its parser,
// storages and corruption policy) read into NumPy arrays that view the source's batches.
//
// Thread-safety: a reader is driven by one Python thread; Next() releases the GIL while the
// source reads.
#ifndef REEL_PYTHON_DATA_H_
#define REEL_PYTHON_DATA_H_

#include <pybind11/pybind11.h>

namespace reel::python {

void DefineData(pybind11::module_& m);

}  // namespace reel::python

#endif  // REEL_PYTHON_DATA_H_
