// The pybind11 half of `data=` (docs/python.md, "Training from memory"): NumPy arrays that
// python/reel/_inmemory.py has checked and laid out, registered as tables of the data source
// "numpy" (array_source.h) without copying them, and iterables of batches as streams.
//
// Thread-safety: called with the GIL held; a stream takes the GIL for each batch, and a table
// takes it to release its arrays, from whichever thread drops the last reference.
#ifndef REEL_PYTHON_INMEMORY_H_
#define REEL_PYTHON_INMEMORY_H_

#include <pybind11/pybind11.h>

namespace reel::python {

void DefineInMemory(pybind11::module_& m);

}  // namespace reel::python

#endif  // REEL_PYTHON_INMEMORY_H_
