// EpochStream (see record_stream.h).
#include "record_stream.h"

#include <iostream>

namespace reel::tfrecord {

uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

EpochStream::EpochStream(const StreamConfig* config, int64_t epoch, const ConsumedSet* consumed)
    : config_(config), consumed_(consumed) {
  const size_t n = config->files.size();
  const auto world = static_cast<size_t>(config->shard.world_size);
  const auto rank = static_cast<size_t>(config->shard.rank);
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  uint64_t epoch_seed = MixSeed(config->seed, static_cast<uint64_t>(epoch));
  if (config->shuffle_buffer > 0) {
    // Same permutation on every rank (it depends on seed and epoch only), so the ranks still
    // partition the files.
    std::mt19937_64 file_rng(epoch_seed);
    for (size_t i = n; i > 1; --i) std::swap(all[i - 1], all[file_rng() % i]);
  }
  by_file_ = n >= world && consumed == nullptr;
  if (by_file_) {
    for (size_t i = rank; i < n; i += world) order_.push_back(all[i]);
  } else {
    order_ = all;
  }
  rng_.seed(MixSeed(epoch_seed, rank));
}

Status EpochStream::OpenFile(size_t i) {
  const SourceFile& f = config_->files[i];
  reader_.reset();
  REEL_ASSIGN_OR_RETURN(file_, f.storage->OpenRead(f.uri));
  reader_ = std::make_unique<recordio::RecordReader>(
      file_.get(), recordio::RecordReaderOptions{.compression = f.compression});
  file_record_ = 0;
  return Status::Ok();
}

// Counts and logs a skipped record (when this rank owns it), or returns `why` without skip_corrupt.
Status EpochStream::Skip(const Status& why, bool owned) {
  if (!config_->skip_corrupt || why.code() != StatusCode::kDataLoss) return why;
  if (!owned) return Status::Ok();
  if (skipped_ < 10)
    std::cerr << config_->log_prefix << ": skipping corrupt record: " << why.message() << "\n";
  if (skipped_ == 0) first_skip_ = why.message();
  ++skipped_;
  return Status::Ok();
}

Status EpochStream::ReadOwned(std::unique_ptr<PendingRecord>* out) {
  const auto world = static_cast<uint64_t>(config_->shard.world_size);
  const auto rank = static_cast<uint64_t>(config_->shard.rank);
  while (true) {
    if (reader_ == nullptr) {
      if (next_file_ >= order_.size()) return OutOfRangeError("end of epoch");
      REEL_RETURN_IF_ERROR(OpenFile(order_[next_file_++]));
    }
    const size_t file = order_[next_file_ - 1];
    const uint64_t index = file_record_;
    const bool consumed = consumed_ != nullptr && consumed_->Contains(file, index);
    const bool owned = !consumed && (by_file_ || record_index_ % world == rank);
    const uint64_t offset = reader_->offset();
    if (!owned) {
      Status s = reader_->SkipRecord();
      if (s.code() == StatusCode::kOutOfRange) {
        reader_.reset();
        continue;
      }
      ++file_record_;
      if (!consumed) ++record_index_;
      if (!s.ok()) {
        // The stream is out of sync: the rest of this file is lost for every rank alike, and the
        // record's owner (which reads it) counts it.
        REEL_RETURN_IF_ERROR(Skip(s, false));
        reader_.reset();
      }
      continue;
    }
    if (free_.empty()) free_.push_back(std::make_unique<PendingRecord>());
    std::unique_ptr<PendingRecord> p = std::move(free_.back());
    free_.pop_back();
    Status s = reader_->ReadRecordDeferringCrc(&p->payload, &p->stored_crc);
    if (s.code() == StatusCode::kOutOfRange) {
      free_.push_back(std::move(p));
      reader_.reset();
      continue;
    }
    ++record_index_;
    ++file_record_;
    p->file = file;
    p->index = index;
    p->offset = offset;
    if (s.ok()) {
      s = DecodeVideo(p->payload, config_->decode, &p->rec);
      if (!s.ok()) {
        // A payload that does not decode is reported as what it most likely is: a CRC
        // mismatch if its bytes are not the ones written, else the decoding error.
        Status crc = CheckCrc(*p, recordio::Crc32c(p->payload));
        s = !crc.ok()
                ? crc
                : s.WithContext(reader_->uri() +
                                (reader_->compressed() ? ": uncompressed offset " : ": offset ") +
                                std::to_string(offset) + " (record index " +
                                std::to_string(file_record_ - 1) + ")");
      }
    }
    if (s.ok()) {
      p->framed_bytes = static_cast<int64_t>(p->payload.size() + recordio::kRecordOverhead);
      *out = std::move(p);
      return Status::Ok();
    }
    free_.push_back(std::move(p));
    const bool in_sync = reader_->can_continue();
    REEL_RETURN_IF_ERROR(Skip(s, true));
    if (!in_sync) {
      std::cerr << config_->log_prefix << ": " << reader_->uri()
                << ": the rest of the file is unreadable after offset " << offset << "\n";
      reader_.reset();
    }
  }
}

Status EpochStream::Next(std::unique_ptr<PendingRecord>* out) {
  const auto capacity = static_cast<size_t>(config_->shuffle_buffer);
  if (capacity == 0) return ReadOwned(out);
  while (!input_done_ && buffer_.size() < capacity) {
    std::unique_ptr<PendingRecord> p;
    Status s = ReadOwned(&p);
    if (s.code() == StatusCode::kOutOfRange) {
      input_done_ = true;
      break;
    }
    REEL_RETURN_IF_ERROR(s);
    buffer_.push_back(std::move(p));
  }
  if (buffer_.empty()) return OutOfRangeError("end of epoch");
  size_t j = static_cast<size_t>(rng_() % buffer_.size());
  *out = std::move(buffer_[j]);
  buffer_[j] = std::move(buffer_.back());
  buffer_.pop_back();
  return Status::Ok();
}

Status EpochStream::CheckCrc(const PendingRecord& p, uint32_t computed) const {
  if (computed == p.stored_crc) return Status::Ok();
  const SourceFile& f = config_->files[p.file];
  return recordio::DataCrcMismatchError(f.uri, f.compression != recordio::Compression::kNone,
                                        p.offset, p.payload.size(), p.stored_crc, computed);
}

void EpochStream::Recycle(std::unique_ptr<PendingRecord> p) {
  if (p != nullptr && free_.size() < 4096) free_.push_back(std::move(p));
}

}  // namespace reel::tfrecord
