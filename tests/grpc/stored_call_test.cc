// The gRPC adapter's reading of a stored call (ReadStoredCall, which reads
// the body field by field without protobuf's generated code) against
// protobuf's own parse of proto/stored_call.proto: the same verdict and the
// same fields on valid records, on records with unknown, repeated and
// mistyped fields, and on damaged bytes (a fixed-seed walk over mutations).

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <google/protobuf/unknown_field_set.h>

#include "stored_call.h"
#include "stored_call.pb.h"

namespace idem::grpc {
namespace {

using MetadataItem = std::tuple<bool, std::string, std::string>;

class Collect final : public MetadataSink {
 public:
  void Entry(bool trailing, std::string_view key,
             std::string_view value) override {
    entries.emplace_back(trailing, std::string(key), std::string(value));
  }
  std::vector<MetadataItem> entries;
};

// Both readers on `bytes`: the same verdict, and the same fields when it
// is a StoredCall.
// Returns protobuf's verdict.
bool ExpectSameReading(const std::string& bytes) {
  internal::StoredCall reference;
  const bool parsed =
      reference.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  DecodedCall call;
  Collect sink;
  const bool read = ReadStoredCall(bytes, call, &sink);
  EXPECT_EQ(read, parsed) << "bytes of size " << bytes.size();
  if (!read || !parsed) return parsed;
  EXPECT_EQ(call.code, reference.code());
  EXPECT_EQ(call.message, reference.message());
  EXPECT_EQ(call.details, reference.details());
  EXPECT_EQ(call.response, reference.response());
  std::vector<MetadataItem> expected;
  for (const auto& e : reference.initial_metadata()) {
    expected.emplace_back(false, e.key(), e.value());
  }
  for (const auto& e : reference.trailing_metadata()) {
    expected.emplace_back(true, e.key(), e.value());
  }
  // In body order for each field; protobuf keeps each field's order.
  std::vector<MetadataItem> got_initial;
  std::vector<MetadataItem> got_trailing;
  for (const MetadataItem& e : sink.entries) {
    (std::get<0>(e) ? got_trailing : got_initial).push_back(e);
  }
  got_initial.insert(got_initial.end(), got_trailing.begin(),
                     got_trailing.end());
  EXPECT_EQ(got_initial, expected);
  return parsed;
}

std::string RandomBytes(std::mt19937& random, std::size_t max) {
  std::string s(random() % (max + 1), '\0');
  for (char& c : s) c = static_cast<char>(random());
  return s;
}

internal::StoredCall RandomCall(std::mt19937& random) {
  internal::StoredCall call;
  if (random() % 2) call.set_code(static_cast<std::int32_t>(random() % 20) - 2);
  if (random() % 2) call.set_message(RandomBytes(random, 20));
  if (random() % 3 == 0) call.set_details(RandomBytes(random, 20));
  for (int i = static_cast<int>(random() % 3); i > 0; --i) {
    auto* e = call.add_initial_metadata();
    e->set_key(RandomBytes(random, 8));
    e->set_value(RandomBytes(random, 8));
  }
  for (int i = static_cast<int>(random() % 3); i > 0; --i) {
    auto* e = call.add_trailing_metadata();
    e->set_key(RandomBytes(random, 8));
    e->set_value(RandomBytes(random, 8));
  }
  if (random() % 2) call.set_response(RandomBytes(random, 40));
  if (random() % 3 == 0) {
    // Fields a later format might add, and known numbers of another type.
    auto* unknown = call.GetReflection()->MutableUnknownFields(&call);
    unknown->AddVarint(1 + static_cast<int>(random() % 9), random());
    unknown->AddLengthDelimited(2 + static_cast<int>(random() % 9),
                                RandomBytes(random, 6));
    unknown->AddFixed32(7, random());
    unknown->AddFixed64(6, random());
    unknown->AddGroup(9)->AddVarint(1, random());
  }
  return call;
}

TEST(StoredCallReadingTest, AnEmptyBodyIsAnOkCallWithNothingElse) {
  DecodedCall call;
  Collect sink;
  ASSERT_TRUE(ReadStoredCall("", call, &sink));
  EXPECT_EQ(call.code, 0);
  EXPECT_TRUE(call.response.empty());
  EXPECT_TRUE(sink.entries.empty());
}

TEST(StoredCallReadingTest, AFullCallReadsAsProtobufReadsIt) {
  internal::StoredCall call;
  call.set_code(5);
  call.set_message("not found");
  call.set_details(std::string("\0\1details", 9));
  auto* initial = call.add_initial_metadata();
  initial->set_key("x-version");
  initial->set_value("1");
  auto* trailing = call.add_trailing_metadata();
  trailing->set_key("x-trace");
  trailing->set_value("abc");
  call.set_response("a response message");
  ExpectSameReading(call.SerializeAsString());
}

TEST(StoredCallReadingTest, BrokenAndForeignBytesAreRefusedAsProtobufRefuses) {
  const std::string cases[] = {
      std::string("\x00", 1),  // field number 0
      "\x08",                  // a varint cut short
      "\x12\x05"
      "abc",                   // a length past the end
      "\x0c",                  // a stray end-group
      "\x0b\x08\x01",          // a group never ended
      "\x22\x02\x0a\x05",      // an entry whose key runs past it
      "\x22\x03\x08\x01\x0c",  // an entry ending in an end-group
      "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",      // ten-byte varint
      "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  // eleven
      "not a gRPC call",
  };
  for (const std::string& bytes : cases) ExpectSameReading(bytes);
}

TEST(StoredCallReadingTest, RandomCallsAndTheirMutationsReadTheSame) {
  std::mt19937 random(20261205);
  int calls = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = RandomCall(random).SerializeAsString();
    // Repeated fields appended (the last singular one wins), then damage.
    if (random() % 4 == 0) bytes += RandomCall(random).SerializeAsString();
    switch (random() % 4) {
      case 0:
        break;
      case 1:
        if (!bytes.empty()) bytes[random() % bytes.size()] ^= 1 << random() % 8;
        break;
      case 2:
        bytes.resize(random() % (bytes.size() + 1));
        break;
      case 3:
        bytes.insert(random() % (bytes.size() + 1), 1,
                     static_cast<char>(random()));
        break;
    }
    (ExpectSameReading(bytes) ? calls : refused) += 1;
    if (HasFailure()) return;
  }
  // The walk covered both verdicts.
  EXPECT_GT(calls, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace idem::grpc
