// The wire of `reel launch --nnodes MIN:MAX`'s rendezvous (core/cli/rendezvous_wire.h): frames
// round-trip, bytes that are no frame are refused naming what is wrong, a frame cut anywhere is
// waited for, and a MAC holds only for the same secret, nonces, job and node.
#include "rendezvous_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace reel::cli::rdzv {
namespace {

TEST(RendezvousWire, FramesRoundTripAndACutFrameIsWaitedFor) {
  const Message assign{MsgType::kAssign, {"3", "1", "2", "4", "29501", "a:1, b:2"}};
  const std::string frame = EncodeFrame(assign);
  for (size_t cut = 0; cut < frame.size(); ++cut) {
    size_t used = 0;
    Result<std::optional<Message>> m = DecodeFrame(frame.substr(0, cut), &used);
    ASSERT_TRUE(m.ok()) << cut << ": " << m.status();
    EXPECT_FALSE(m->has_value()) << cut;
  }
  size_t used = 0;
  Result<std::optional<Message>> m = DecodeFrame(frame + "next", &used);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status();
  EXPECT_EQ(used, frame.size());
  EXPECT_EQ((*m)->type, MsgType::kAssign);
  EXPECT_EQ((*m)->fields, assign.fields);
}

TEST(RendezvousWire, BytesThatAreNoFrameAreRefusedNamingWhy) {
  struct Case {
    std::string bytes, says;
  };
  const std::string two_fields = EncodeFrame({MsgType::kNewRound, {"1", "why"}});
  std::string one_field_short = two_fields;
  one_field_short[0] = static_cast<char>(one_field_short[0] - 5);  // "why" and its length cut
  one_field_short.resize(one_field_short.size() - 5);
  const Case cases[] = {
      {std::string("\xff\xff\xff\x7f", 4) + "x", "rendezvous frame of 2147483647 bytes; 1 to 4096"},
      {std::string("\0\0\0\0", 4), "rendezvous frame of 0 bytes"},
      {std::string("\x01\0\0\0\x63", 5), "rendezvous message of unknown type 99"},
      {std::string("\x04\0\0\0\x07\x09\0x", 8), "rendezvous field runs past its frame"},
      {std::string("\x02\0\0\0\x07\x01", 6), "rendezvous field length cut off"},
      {one_field_short, "rendezvous message of type 7 with 1 field(s), not 2"},
      {EncodeFrame({MsgType::kJoin, {}}), "rendezvous message of type 5 with 0 field(s), not 1"},
  };
  for (const Case& c : cases) {
    size_t used = 0;
    Result<std::optional<Message>> m = DecodeFrame(c.bytes, &used);
    ASSERT_FALSE(m.ok()) << c.says;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status();
  }
  // More fields than the type has: Done has none.
  std::string done = EncodeFrame({MsgType::kDone, {}});
  done[0] = 3;
  done += std::string("\x00\x00", 2);
  size_t used = 0;
  Result<std::optional<Message>> m = DecodeFrame(done, &used);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("with more than 0 field(s)"), std::string::npos)
      << m.status();
}

TEST(RendezvousWire, AMacHoldsOnlyForTheSameSecretNoncesJobAndNode) {
  const std::string mac = NodeMac("secret", "client", "ns", "nc", "job", "node");
  EXPECT_EQ(mac.size(), 64u);
  EXPECT_TRUE(SameMac(mac, NodeMac("secret", "client", "ns", "nc", "job", "node")));
  for (const std::string& other : {NodeMac("secreT", "client", "ns", "nc", "job", "node"),
                                   NodeMac("secret", "server", "ns", "nc", "job", "node"),
                                   NodeMac("secret", "client", "nS", "nc", "job", "node"),
                                   NodeMac("secret", "client", "ns", "nC", "job", "node"),
                                   NodeMac("secret", "client", "ns", "nc", "jo", "bnode"),
                                   NodeMac("secret", "client", "ns", "nc", "job", "nodE")})
    EXPECT_FALSE(SameMac(mac, other));
  EXPECT_FALSE(SameMac("", ""));
  Result<std::string> a = FreshNonceHex(), b = FreshNonceHex();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace reel::cli::rdzv
