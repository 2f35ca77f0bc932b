// Record I/O: CRC32C vectors, framing vectors, round trips, and every corruption case.
#include "reel/recordio.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

#include "reel/testing/mem_file.h"

namespace reel::recordio {
namespace {

using ::reel::testing::MemFile;
using ::reel::testing::MemWritable;
using ::testing::HasSubstr;

// "0300 b099..." -> the bytes; spaces only separate fields for the reader.
std::string FromHex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (char c : hex) {
    if (c == ' ') continue;
    int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    if (hi < 0) {
      hi = v;
    } else {
      out += static_cast<char>(hi * 16 + v);
      hi = -1;
    }
  }
  return out;
}

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += static_cast<char>(b);
  return s;
}
std::string Seq(int n, bool reverse) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>(reverse ? n - 1 - i : i);
  return s;
}

struct CrcVector {
  std::string input;
  uint32_t crc;  // 0: not given
  uint32_t masked;
};

std::vector<CrcVector> Vectors() {
  return {{"123456789", 0xe3069283u, 0},
          {std::string(32, '\0'), 0x8a9136aau, 0x0fd7fffau},
          {std::string(32, '\xff'), 0x62a8ab43u, 0xf909b029u},
          {Seq(32, false), 0x46dd794eu, 0},
          {Seq(32, true), 0x113fdb5cu, 0},
          {"foo", 0, 0xfebe8a61u},
          {Bytes({3, 0, 0, 0, 0, 0, 0, 0}), 0, 0x0e4999b0u}};
}

TEST(Crc32cTest, PublishedVectorsBothImplementations) {
  for (const auto& v : Vectors()) {
    uint32_t hw = Crc32c(v.input);
    uint32_t sw = Crc32cExtendPortable(0, v.input.data(), v.input.size());
    if (v.crc != 0) {
      EXPECT_EQ(hw, v.crc) << v.input;
      EXPECT_EQ(sw, v.crc) << v.input;
    }
    if (v.masked != 0) {
      EXPECT_EQ(MaskCrc(hw), v.masked);
      EXPECT_EQ(MaskCrc(sw), v.masked);
    }
    EXPECT_EQ(UnmaskCrc(MaskCrc(hw)), hw);
  }
}

TEST(Crc32cTest, ExtendMatchesWholeAtEverySplitAndAlignment) {
  std::mt19937 rng(7);
  std::string data(1000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const uint32_t whole = Crc32cExtendPortable(0, data.data(), data.size());
  for (size_t start : {0, 1, 3, 7}) {
    std::string_view tail(data.data() + start, data.size() - start);
    ASSERT_EQ(Crc32c(tail.data(), tail.size()), Crc32cExtendPortable(0, tail.data(), tail.size()));
  }
  for (size_t split : {0, 1, 5, 8, 31, 500, 999, 1000})
    EXPECT_EQ(Crc32cExtend(Crc32c(data.data(), split), data.data() + split, data.size() - split),
              whole);
}

const char kFooFile[] = "0300000000000000 b099490e 666f6f 618abefe";
const char kBarRecord[] = "0300000000000000 b099490e 626172 4600e5c8";

TEST(FramingTest, WholeFileVectors) {
  std::string out;
  AppendFramedRecord("foo", &out);
  EXPECT_EQ(out, FromHex(kFooFile));
  AppendFramedRecord("bar", &out);
  EXPECT_EQ(out, FromHex(kFooFile) + FromHex(kBarRecord));

  std::string written;
  auto w = RecordWriter::Create(std::make_unique<MemWritable>(&written));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write("foo").ok());
  ASSERT_TRUE((*w)->Write("bar").ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(written, out);
  EXPECT_EQ((*w)->offset(), 38u);

  MemFile file("two.tfrecord", out);
  RecordReader r(&file);
  std::string rec;
  ASSERT_TRUE(r.ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "foo");
  EXPECT_EQ(r.offset(), 19u);
  ASSERT_TRUE(r.ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "bar");
  EXPECT_EQ(r.ReadRecord(&rec).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.ReadRecord(&rec).code(), StatusCode::kOutOfRange);
}

std::vector<std::string> SampleRecords() {
  std::mt19937 rng(3);
  std::vector<std::string> recs = {"", "x", std::string(300000, 'a')};
  for (int i = 0; i < 60; ++i) {
    std::string s(rng() % 5000, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 7);  // compressible
    recs.push_back(s);
  }
  return recs;
}

std::string Inflate(const std::string& in, int bits) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, bits), Z_OK);
  std::string out(64 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

class RoundTripTest : public ::testing::TestWithParam<Compression> {};

TEST_P(RoundTripTest, WriterThenReader) {
  const auto recs = SampleRecords();
  std::string bytes;
  auto w = RecordWriter::Create(std::make_unique<MemWritable>(&bytes),
                                {.compression = GetParam(), .buffer_size = 4096});
  ASSERT_TRUE(w.ok()) << w.status();
  for (size_t i = 0; i < recs.size(); ++i) {
    ASSERT_TRUE((*w)->Write(recs[i]).ok());
    if (i == 10) {
      ASSERT_TRUE((*w)->Flush().ok());  // a sync flush mid-stream stays readable
    }
  }
  ASSERT_TRUE((*w)->Close().ok());

  std::string plain;
  for (const auto& r : recs) AppendFramedRecord(r, &plain);
  if (GetParam() == Compression::kNone) {
    EXPECT_EQ(bytes, plain);
  }
  // Checked with zlib directly, independently of our reader.
  if (GetParam() == Compression::kGzip) {
    EXPECT_EQ(bytes.substr(0, 2), "\x1f\x8b");
    EXPECT_EQ(Inflate(bytes, 31), plain);
  }
  if (GetParam() == Compression::kZlib) {
    EXPECT_EQ(Inflate(bytes, 15), plain);
  }
  if (GetParam() != Compression::kNone) {
    EXPECT_LT(bytes.size(), plain.size());
  }

  MemFile file("rt", bytes);
  RecordReader r(&file, {.compression = GetParam(), .buffer_size = 1000, .inflate_chunk = 1000});
  std::string rec;
  for (const auto& want : recs) {
    ASSERT_TRUE(r.ReadRecord(&rec).ok());
    ASSERT_EQ(rec, want);
  }
  EXPECT_EQ(r.ReadRecord(&rec).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.offset(), plain.size());

  // SkipRecord steps over records without reading them and stays in sync.
  RecordReader s(&file, {.compression = GetParam()});
  for (size_t i = 0; i + 1 < recs.size(); ++i) ASSERT_TRUE(s.SkipRecord().ok());
  ASSERT_TRUE(s.ReadRecord(&rec).ok());
  EXPECT_EQ(rec, recs.back());
  EXPECT_EQ(s.SkipRecord().code(), StatusCode::kOutOfRange);
}

INSTANTIATE_TEST_SUITE_P(AllCompressions, RoundTripTest,
                         ::testing::Values(Compression::kNone, Compression::kZlib,
                                           Compression::kGzip));

TEST(CompressionTest, NamesAndSuffixes) {
  EXPECT_EQ(*ParseCompression("auto", "a/b.tfrecord.gz"), Compression::kGzip);
  EXPECT_EQ(*ParseCompression("auto", "a/b.tfrecord.zlib"), Compression::kZlib);
  EXPECT_EQ(*ParseCompression("auto", "a/b.tfrecord"), Compression::kNone);
  EXPECT_EQ(*ParseCompression("auto", "a/b"), Compression::kNone);
  EXPECT_EQ(*ParseCompression("gzip", "a/b"), Compression::kGzip);
  Result<Compression> bad = ParseCompression("lz4", "x");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("lz4"));
}

// Three records "foo", "bar", "bazz" at offsets 0, 19, 38.
std::string ThreeRecords() {
  std::string s;
  AppendFramedRecord("foo", &s);
  AppendFramedRecord("bar", &s);
  AppendFramedRecord("bazz", &s);
  return s;
}

Status ReadAllRecords(const std::string& bytes, std::vector<std::string>* got,
                      Compression c = Compression::kNone) {
  MemFile file("bad.tfrecord", bytes);
  RecordReader r(&file, {.compression = c});
  std::string rec;
  while (true) {
    Status s = r.ReadRecord(&rec);
    if (s.code() == StatusCode::kOutOfRange) return Status::Ok();
    if (!s.ok()) return s;
    got->push_back(rec);
  }
}

void ExpectDataLoss(const Status& s, const std::string& offset, const std::string& check) {
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("bad.tfrecord")) << s;
  EXPECT_THAT(s.message(), HasSubstr("offset " + offset + ":")) << s;
  EXPECT_THAT(s.message(), HasSubstr(check)) << s;
}

TEST(CorruptionTest, FlippedBitInLength) {
  std::string b = ThreeRecords();
  b[19 + 0] ^= 0x01;  // second record's length
  std::vector<std::string> got;
  ExpectDataLoss(ReadAllRecords(b, &got), "19", "length CRC mismatch");
  EXPECT_EQ(got, std::vector<std::string>{"foo"});
}

TEST(CorruptionTest, FlippedBitInLengthCrc) {
  std::string b = ThreeRecords();
  b[19 + 9] ^= 0x20;
  std::vector<std::string> got;
  ExpectDataLoss(ReadAllRecords(b, &got), "19", "length CRC mismatch");
}

TEST(CorruptionTest, FlippedBitInPayloadIsRecoverable) {
  std::string b = ThreeRecords();
  b[19 + 12 + 1] ^= 0x04;  // "bar" -> "ber"
  MemFile file("bad.tfrecord", b);
  RecordReader r(&file);
  std::string rec;
  ASSERT_TRUE(r.ReadRecord(&rec).ok());
  Status s = r.ReadRecord(&rec);
  ExpectDataLoss(s, "19", "data CRC mismatch");
  EXPECT_TRUE(r.can_continue());
  ASSERT_TRUE(r.ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "bazz");
}

// ReadRecordDeferringCrc hands the stored CRC to the caller, who checks it and reports a
// mismatch in the reader's own words; the framing checks stay in the reader.
TEST(CorruptionTest, DeferredCrcIsTheStoredOneAndReportedLikeTheReaderDoes) {
  std::string b = ThreeRecords();
  b[19 + 12 + 1] ^= 0x04;  // "bar" -> "ber"
  MemFile file("bad.tfrecord", b);
  RecordReader deferring(&file);
  std::string rec;
  uint32_t stored = 0;
  ASSERT_TRUE(deferring.ReadRecordDeferringCrc(&rec, &stored).ok());
  EXPECT_EQ(stored, Crc32c("foo"));
  const uint64_t offset = deferring.offset();
  ASSERT_TRUE(deferring.ReadRecordDeferringCrc(&rec, &stored).ok());  // bytes unchecked
  EXPECT_EQ(rec, "ber");
  EXPECT_EQ(stored, Crc32c("bar"));
  Status mine = DataCrcMismatchError(deferring.uri(), deferring.compressed(), offset, rec.size(),
                                     stored, Crc32c(rec));
  RecordReader checking(&file);
  ASSERT_TRUE(checking.ReadRecord(&rec).ok());
  Status theirs = checking.ReadRecord(&rec);
  EXPECT_EQ(mine.code(), theirs.code());
  EXPECT_EQ(mine.message(), theirs.message());
  ExpectDataLoss(mine, "19", "data CRC mismatch");

  b[0] ^= 0x01;  // the first length: framing errors still come from the reader
  MemFile broken("bad.tfrecord", b);
  RecordReader r(&broken);
  ExpectDataLoss(r.ReadRecordDeferringCrc(&rec, &stored), "0", "length CRC mismatch");
}

TEST(CorruptionTest, FlippedBitInDataCrc) {
  std::string b = ThreeRecords();
  b[38 + 12 + 4 + 2] ^= 0x80;
  std::vector<std::string> got;
  ExpectDataLoss(ReadAllRecords(b, &got), "38", "data CRC mismatch");
  EXPECT_EQ(got.size(), 2u);
}

TEST(CorruptionTest, CutInsideHeader) {
  std::string b = ThreeRecords().substr(0, 19 + 5);
  MemFile file("bad.tfrecord", b);
  RecordReader r(&file);
  std::string rec;
  ASSERT_TRUE(r.ReadRecord(&rec).ok());
  Status s = r.ReadRecord(&rec);
  ExpectDataLoss(s, "19", "truncated record header (5 of 12 bytes)");
  EXPECT_FALSE(r.can_continue());
  EXPECT_EQ(r.ReadRecord(&rec), s);  // sticky
}

TEST(CorruptionTest, CutInsidePayload) {
  std::vector<std::string> got;
  ExpectDataLoss(ReadAllRecords(ThreeRecords().substr(0, 38 + 12 + 2), &got), "38",
                 "truncated record");
  // Cut inside the final data CRC.
  got.clear();
  ExpectDataLoss(ReadAllRecords(ThreeRecords().substr(0, 38 + 12 + 4 + 3), &got), "38",
                 "truncated record");
}

TEST(CorruptionTest, ZeroLengthFileIsValidAndEmpty) {
  std::vector<std::string> got;
  EXPECT_TRUE(ReadAllRecords("", &got).ok());
  EXPECT_TRUE(got.empty());
  MemFile file("empty", "");
  RecordReader r(&file);
  EXPECT_EQ(r.SkipRecord().code(), StatusCode::kOutOfRange);
}

std::string HugeHeader(uint64_t length) {
  std::string h(8, '\0');
  std::memcpy(h.data(), &length, 8);
  uint32_t crc = MaskCrc(Crc32c(h));
  h.append(reinterpret_cast<const char*>(&crc), 4);
  return h + "some bytes";
}

TEST(CorruptionTest, HugeDeclaredLengthIsBoundedByFileSize) {
  std::string b = ThreeRecords() + HugeHeader(uint64_t{1} << 50);
  MemFile file("bad.tfrecord", b);
  RecordReader r(&file);
  std::string rec;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.ReadRecord(&rec).ok());
  Status s = r.ReadRecord(&rec);
  ExpectDataLoss(s, "58", "declares 1125899906842624 payload bytes but only 10 bytes follow");
  EXPECT_LT(rec.capacity(), size_t{1} << 20);
  MemFile file2("bad.tfrecord", b);
  RecordReader r2(&file2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r2.SkipRecord().ok());
  ExpectDataLoss(r2.SkipRecord(), "58", "declares");
}

TEST(CorruptionTest, HugeDeclaredLengthInsideGzipAllocatesOnlyWhatArrives) {
  std::string gz;
  auto w =
      RecordWriter::Create(std::make_unique<MemWritable>(&gz), {.compression = Compression::kNone});
  // Build the corrupt stream by hand: a valid header declaring 2^40 bytes, then a few bytes.
  std::string plain = HugeHeader(uint64_t{1} << 40);
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  gz.resize(1024);
  z.next_in = reinterpret_cast<Bytef*>(plain.data());
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(gz.data());
  z.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gz.resize(z.total_out);
  deflateEnd(&z);
  MemFile file("bad.tfrecord.gz", gz);
  RecordReader r(&file, {.compression = Compression::kGzip});
  std::string rec;
  Status s = r.ReadRecord(&rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("uncompressed offset 0: truncated record payload (10 of"));
  EXPECT_LT(rec.capacity(), size_t{4} << 20);
}

TEST(CorruptionTest, GarbageAndTruncatedCompressedStreams) {
  std::string gz;
  auto w =
      RecordWriter::Create(std::make_unique<MemWritable>(&gz), {.compression = Compression::kGzip});
  for (const auto& rec : SampleRecords()) ASSERT_TRUE((*w)->Write(rec).ok());
  ASSERT_TRUE((*w)->Close().ok());
  std::vector<std::string> got;
  Status s = ReadAllRecords(gz.substr(0, gz.size() / 2), &got, Compression::kGzip);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("bad.tfrecord"));
  EXPECT_THAT(s.message(), HasSubstr("truncated"));

  std::string garbage = gz;
  for (size_t i = 100; i < 200; ++i) garbage[i] = static_cast<char>(i * 7);
  got.clear();
  s = ReadAllRecords(garbage, &got, Compression::kGzip);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("bad.tfrecord"));
  EXPECT_THAT(s.message(), HasSubstr("offset"));

  got.clear();
  s = ReadAllRecords("definitely not zlib", &got, Compression::kZlib);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("zlib stream is corrupt"));
}

// Found by tests/fuzz/tfrecord_framing_fuzz (a timeout): a compressed stream that breaks while a
// record header is read left the reader claiming it could continue, so a caller that goes on
// while can_continue() (the tfrecord source with skip_corrupt) called it forever. The input is the
// fuzzer's: an uncompressed file of one empty record, read as zlib and as gzip.
TEST(CorruptionTest, BrokenStreamUnderAHeaderIsSticky) {
  const std::string one_empty_record = FromHex("0000000000000000 29039807 d8ea82a2");
  for (Compression c : {Compression::kZlib, Compression::kGzip}) {
    MemFile file("bad.tfrecord", one_empty_record);
    RecordReader reader(&file, {.compression = c});
    std::string rec;
    Status first = reader.ReadRecord(&rec);
    EXPECT_EQ(first.code(), StatusCode::kDataLoss) << first;
    EXPECT_THAT(first.message(), HasSubstr("stream is corrupt"));
    EXPECT_FALSE(reader.can_continue());
    Status again = reader.SkipRecord();
    EXPECT_EQ(again.message(), first.message());
  }
}

}  // namespace
}  // namespace reel::recordio
