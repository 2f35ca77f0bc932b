// train, evaluate, predict and tune: the core's own training job, evaluator and search, as
// `reel train`, `reel eval`, `reel predict` and `reel tune` run them.
//
// Thread-safety: each call blocks its Python thread with the GIL released; callbacks take the GIL
// on the trainer's lead thread.
#ifndef REEL_PYTHON_TRAIN_H_
#define REEL_PYTHON_TRAIN_H_

#include <pybind11/pybind11.h>

#include "reel/core/metrics.h"

namespace reel::python {

void DefineTrain(pybind11::module_& m);
// The metrics as Python sees them everywhere: a dict of gap, hit_at_1, perr, map, videos, top_k.
pybind11::dict MetricsDict(const core::EvalMetrics& m);

}  // namespace reel::python

#endif  // REEL_PYTHON_TRAIN_H_
