// The wire format's decoders on valid and invalid bytes.
#include "wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reel::tcp {
namespace {

using ::testing::HasSubstr;

TEST(Wire, FrameHeaderRoundTrips) {
  FrameHeader h{FrameType::kData, 3, 32767, kMaxMessageBytes};  // the largest a frame may claim
  auto bytes = EncodeFrameHeader(h);
  Result<FrameHeader> back = DecodeFrameHeader(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, FrameType::kData);
  EXPECT_EQ(back->source, 3u);
  EXPECT_EQ(back->tag, 32767u);
  EXPECT_EQ(back->length, kMaxMessageBytes);
}

// A collective frame's tag field is the collective's number, up to 2^31 - 1 (not a tag).
TEST(Wire, CollectiveFramesCarryTheCollectiveNumber) {
  auto bytes = EncodeFrameHeader({FrameType::kCollective, 1, kCollectiveSeqMask, 64});
  Result<FrameHeader> back = DecodeFrameHeader(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, FrameType::kCollective);
  EXPECT_EQ(back->tag, kCollectiveSeqMask);
  bytes[15] = std::byte{0x80};  // 2^31 + ...
  EXPECT_THAT(DecodeFrameHeader(bytes).status().message(), HasSubstr("collective number"));
  // A data frame's tag still stops at kMaxTag.
  auto data = EncodeFrameHeader({FrameType::kData, 1, 0, 64});
  data[14] = std::byte{0x01};  // tag 65536
  EXPECT_THAT(DecodeFrameHeader(data).status().message(), HasSubstr("tag 65536"));
}

TEST(Wire, FrameHeaderRejectsEveryBadField) {
  auto good = EncodeFrameHeader({FrameType::kData, 1, 5, 10});
  auto expect_bad = [&](size_t offset, std::byte value, const char* says) {
    auto bytes = good;
    bytes[offset] = value;
    Result<FrameHeader> h = DecodeFrameHeader(bytes);
    ASSERT_FALSE(h.ok()) << "offset " << offset;
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(h.status().message(), HasSubstr(says)) << "offset " << offset;
  };
  expect_bad(0, std::byte{'X'}, "magic");
  expect_bad(4, std::byte{9}, "version 9");
  expect_bad(5, std::byte{0}, "frame type 0");
  expect_bad(5, std::byte{7}, "frame type 7");
  expect_bad(6, std::byte{1}, "reserved");
  expect_bad(13, std::byte{0x80}, "tag");         // tag 32768 + ...
  expect_bad(21, std::byte{0x01}, "payload of");  // length >= 2^40 > kMaxMessageBytes
  EXPECT_THAT(DecodeFrameHeader(std::span(good).first(23)).status().message(),
              HasSubstr("23 bytes, expected 24"));
  auto heartbeat_with_payload = EncodeFrameHeader({FrameType::kHeartbeat, 1, 0, 4});
  EXPECT_THAT(DecodeFrameHeader(heartbeat_with_payload).status().message(),
              HasSubstr("heartbeat or goodbye frame with a tag or payload"));
}

// A frame may claim at most what one Send carries (kMaxMessageBytes): a header claiming more, of
// any type, is refused before anyone allocates or reads a byte of it.
TEST(Wire, AFrameClaimingMoreThanTheLargestMessageIsRefused) {
  for (FrameType type : {FrameType::kData, FrameType::kCollective}) {
    ASSERT_TRUE(DecodeFrameHeader(EncodeFrameHeader({type, 1, 5, kMaxMessageBytes})).ok());
    for (uint64_t length : {uint64_t{kMaxMessageBytes} + 1, uint64_t{1} << 40, ~uint64_t{0}}) {
      Result<FrameHeader> h = DecodeFrameHeader(EncodeFrameHeader({type, 1, 5, length}));
      EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << length;
      EXPECT_THAT(h.status().message(), HasSubstr("payload of " + std::to_string(length) +
                                                  " bytes exceeds the limit of 2147483647"));
    }
  }
}

TEST(Wire, HandshakeMacsBindBothNoncesTheJobAndTheSecret) {
  Hello hello{Purpose::kData, 1, 4, *FreshNonce(), *FreshNonce(), "1234.0"};
  auto hello_bytes = EncodeHello(hello);
  Challenge c{0, 4, *FreshNonce(), hello.job, "1234.0", {}};
  auto challenge_bytes = EncodeChallenge(c);
  auto mac = [](Result<Mac> m) {
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : Mac{};
  };
  const Mac server = mac(ServerMac("s3cret", hello_bytes, challenge_bytes));
  EXPECT_NE(server, Mac{});
  c.mac = server;
  auto with_mac = EncodeChallenge(c);
  // The server's MAC ignores the mac field itself, so the client can recompute it.
  EXPECT_TRUE(MacsEqual(server, mac(ServerMac("s3cret", hello_bytes, with_mac))));
  EXPECT_FALSE(MacsEqual(server, mac(ServerMac("other", hello_bytes, with_mac))));
  EXPECT_FALSE(MacsEqual(server, mac(ClientMac("s3cret", hello_bytes, with_mac))));
  Hello replay = hello;
  replay.nonce = *FreshNonce();
  EXPECT_FALSE(MacsEqual(server, mac(ServerMac("s3cret", EncodeHello(replay), with_mac))));
  // Another job, everything else alike: another MAC.
  Hello other_job = hello;
  other_job.job = *FreshNonce();
  EXPECT_FALSE(MacsEqual(server, mac(ServerMac("s3cret", EncodeHello(other_job), with_mac))));
  Hello other_launch = hello;
  other_launch.job_id = "1200.0";
  EXPECT_FALSE(MacsEqual(server, mac(ServerMac("s3cret", EncodeHello(other_launch), with_mac))));

  Result<Hello> back = DecodeHello(hello_bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 1u);
  EXPECT_EQ(back->nonce, hello.nonce);
  EXPECT_EQ(back->job, hello.job);
  EXPECT_EQ(back->job_id, "1234.0");
  Result<Challenge> challenge = DecodeChallenge(with_mac);
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_EQ(challenge->job, hello.job);
  EXPECT_EQ(challenge->job_id, "1234.0");
  EXPECT_EQ(challenge->mac, server);
  Result<Mac> response = DecodeResponse(EncodeResponse(server));
  ASSERT_TRUE(response.ok());
  EXPECT_TRUE(MacsEqual(*response, server));
}

TEST(Wire, JobNoncesAreNamedShortly) {
  Nonce zero{};
  EXPECT_TRUE(IsZero(zero));
  Nonce n{};
  n[0] = std::byte{0xab};
  n[5] = std::byte{0x01};
  n[31] = std::byte{0xff};
  EXPECT_FALSE(IsZero(n));
  EXPECT_EQ(ShortHex(n), "ab0000000001");
}

TEST(Wire, HelloRejectsRankOutsideWorldAndUnknownPurpose) {
  auto bytes = EncodeHello({Purpose::kJoin, 4, 4, {}});
  EXPECT_THAT(DecodeHello(bytes).status().message(), HasSubstr("rank 4 outside world size 4"));
  bytes = EncodeHello({Purpose::kJoin, 0, 4, {}});
  bytes[5] = std::byte{9};
  EXPECT_THAT(DecodeHello(bytes).status().message(), HasSubstr("unknown purpose 9"));
  EXPECT_THAT(DecodeChallenge(bytes).status().message(), HasSubstr("144 bytes, expected 176"));
}

// The job identity's field: NUL-padded printable text, the longest one fits, nothing else passes.
TEST(Wire, JobIdentitiesRoundTripAndBadOnesAreRefused) {
  for (const std::string& id :
       {std::string(), std::string("1234.0"), std::string(kJobIdBytes, 'j')}) {
    Result<Hello> h = DecodeHello(EncodeHello({Purpose::kJoin, 0, 2, {}, {}, id}));
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->job_id, id);
    EXPECT_EQ(JobName(id), id.empty() ? "(none)" : id);
  }
  const size_t field = kHelloBytes - kJobIdBytes;
  auto bytes = EncodeHello({Purpose::kJoin, 0, 2, {}, {}, "12"});
  bytes[field + 5] = std::byte{'x'};  // after the NUL that ended "12"
  EXPECT_THAT(DecodeHello(bytes).status().message(),
              HasSubstr("job identity has bytes after its end"));
  bytes = EncodeHello({Purpose::kJoin, 0, 2, {}, {}, "12"});
  bytes[field] = std::byte{' '};
  EXPECT_THAT(DecodeHello(bytes).status().message(),
              HasSubstr("job identity contains a non-printable character"));
  auto challenge = EncodeChallenge({0, 2, {}, {}, "12", {}});
  challenge[kChallengeBytes - kMacBytes - kJobIdBytes] = std::byte{0x7f};
  EXPECT_THAT(DecodeChallenge(challenge).status().message(),
              HasSubstr("job identity contains a non-printable character"));
}

TEST(Wire, ControlMessagesRoundTripAndRejectBadBodies) {
  Member m{{"10.77.0.2", 40000}, "boot:0b1a4c55", "allreduce_layout=auto"};
  Result<Member> back = DecodeMember(EncodeMember(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
  auto body = EncodeMember(m);
  body.push_back(std::byte{0});
  EXPECT_THAT(DecodeMember(body).status().message(), HasSubstr("1 trailing bytes"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"h", 0}, "m"})).status().message(), HasSubstr("port 0"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"a b", 1}, "m"})).status().message(),
              HasSubstr("host contains a non-printable"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"h", 1}, ""})).status().message(),
              HasSubstr("empty machine id"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"h", 1}, "a\nb"})).status().message(),
              HasSubstr("machine id contains a non-printable"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"h", 1}, "m", ""})).status().message(),
              HasSubstr("empty options"));
  EXPECT_THAT(DecodeMember(EncodeMember({{"h", 1}, "m", "a= 1"})).status().message(),
              HasSubstr("options contains a non-printable"));
  auto no_options = EncodeMember(m);
  no_options.resize(no_options.size() - m.options.size() - 1);
  EXPECT_THAT(DecodeMember(no_options).status().message(), HasSubstr("truncated options"));
  auto no_machine = EncodeMember(m);
  no_machine.resize(no_machine.size() - m.options.size() - 1 - m.machine.size() - 1);
  EXPECT_THAT(DecodeMember(no_machine).status().message(), HasSubstr("truncated machine id"));

  std::vector<Member> table{{{"127.0.0.1", 1}, "boot:a", "o=1"},
                            {{"127.0.0.1", 2}, "boot:a", "o=1"},
                            {{"::1", 3}, "host:b", "o=1"}};
  Result<std::vector<Member>> t = DecodeTable(EncodeTable(table), 3);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, table);
  EXPECT_THAT(DecodeTable(EncodeTable(table), 4).status().message(),
              HasSubstr("3 ranks, expected world size 4"));
  auto long_table = EncodeTable(table);
  long_table.push_back(std::byte{0});
  EXPECT_THAT(DecodeTable(long_table, 3).status().message(), HasSubstr("1 trailing bytes"));
  std::vector<bool> set{true, false, true, false, false, false, false, false, true};
  Result<std::vector<bool>> s = DecodeRankSet(EncodeRankSet(set), 9);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, set);
  EXPECT_THAT(DecodeRankSet(EncodeRankSet(set), 3).status().message(), HasSubstr("expected 1"));
  auto stray = EncodeRankSet({true, true, true, true});
  EXPECT_THAT(DecodeRankSet(stray, 3).status().message(), HasSubstr("rank 3 outside"));

  auto control = EncodeControl(ControlType::kJoin, body);
  Result<ControlHeader> h = DecodeControlHeader(std::span(control).first(kControlHeaderBytes));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, ControlType::kJoin);
  EXPECT_EQ(h->length, body.size());
  control[4] = std::byte{42};
  EXPECT_THAT(DecodeControlHeader(std::span(control).first(kControlHeaderBytes)).status().message(),
              HasSubstr("unknown type 42"));
  auto huge = EncodeControl(ControlType::kRefuse, {});
  huge[10] = std::byte{0x7f};
  EXPECT_THAT(DecodeControlHeader(huge).status().message(), HasSubstr("exceeds the limit"));
}

}  // namespace
}  // namespace reel::tcp
