// The data source "numpy": video-level features and labels held in memory (NumPy arrays handed
// over by reel.sklearn), so the trainer and evaluator read them as they read TFRecords.
//
// A table is registered under a handle (option `table`) and yields feature "x" [B, 1, D] and the
// labels; `shuffle` permutes each epoch from the run's seed and the epoch. Sharded by record
// index over the ranks. Position: "numpy/v1 table=H epoch=E next=N".
//
// Thread-safety: tables are added and dropped under a lock; a source is used by one thread.
#ifndef REEL_PYTHON_ARRAY_SOURCE_H_
#define REEL_PYTHON_ARRAY_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reel/core/registry.h"

namespace reel::python {

struct ArrayTable {
  int64_t rows = 0, width = 0;
  std::vector<float> x;                // [rows, width]
  std::vector<int64_t> label_offsets;  // [rows + 1]
  std::vector<int32_t> label_ids;
};

int64_t AddArrayTable(ArrayTable table);  // its handle
void DropArrayTable(int64_t handle);
Status RegisterArraySource(core::Registry& registry);

}  // namespace reel::python

#endif  // REEL_PYTHON_ARRAY_SOURCE_H_
