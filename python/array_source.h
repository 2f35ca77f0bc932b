// The data source "numpy": features and labels held in memory by this Python process (reel.train's
// and reel.predict's `data=`, reel.sklearn's arrays), read by the trainer and evaluator as they
// read TFRecords (docs/python.md, "Training from memory").
//
// A table is registered under a handle (option `table`). Each feature of a table gives every
// video a run of frames in memory that the table does not own (`keep` does: the caller's NumPy
// arrays), read in place; a batch is [B, T, D] per feature, T the longest video of the batch
// after truncation to `max_frames` (or `max_frames` with `fixed_length`), zero past each video's
// length, as the tfrecord source pads. Video-level features are runs of one frame. `shuffle`
// permutes each epoch from the run's seed and the epoch; sharded by video index over the ranks.
// A stream instead asks a function for each batch of an epoch in turn (an iterable of batches;
// one rank only). Position: "numpy/v2 videos=R epoch=E next=N" (R videos in the table, N of them
// read; any table of R videos restores it, as a resumed call registers its arrays anew) or
// "numpy/v2 stream epoch=E next=N" (N batches read).
//
// Thread-safety: tables are added and dropped under a lock; a source is used by one thread; a
// stream's function is called from the thread that reads the source.
#ifndef REEL_PYTHON_ARRAY_SOURCE_H_
#define REEL_PYTHON_ARRAY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reel/core/registry.h"

namespace reel::python {

// One feature of a table: video r's frames are lengths[r] rows of `width` floats at frames[r].
struct ArrayFeature {
  std::string name;
  int64_t width = 0;
  std::vector<const float*> frames;  // [rows]
  std::vector<int32_t> lengths;      // [rows], each >= 1
};

struct ArrayTable {
  int64_t rows = 0;
  std::vector<ArrayFeature> features;
  std::vector<int64_t> label_offsets{0};  // [rows + 1], CSR as Batch's
  std::vector<int32_t> label_ids;
  std::vector<std::string> ids;      // [rows], or empty: "r<row>"
  std::shared_ptr<const void> keep;  // owns the memory the features point into
};

// Checks a table's invariants (sizes, lengths >= 1, label offsets); InvalidArgument naming the
// feature or video at fault.
Status ValidateArrayTable(const ArrayTable& table);

// The batch `index` of epoch `epoch` as a table of its videos; OutOfRange after the last.
using BatchStream = std::function<Result<ArrayTable>(int64_t epoch, int64_t index)>;

int64_t AddArrayTable(ArrayTable table);  // its handle
int64_t AddArrayStream(BatchStream stream);
void DropArrayTable(int64_t handle);
int64_t ArrayTableCount();  // tables and streams registered now
Status RegisterArraySource(core::Registry& registry);

}  // namespace reel::python

#endif  // REEL_PYTHON_ARRAY_SOURCE_H_
