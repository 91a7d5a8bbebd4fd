// Tests of record ids: SHA-256(u64be(len(scope)) || scope || key).

#include "idem/record_id.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/fingerprint.h"
#include "idem/internal/sha256.h"

namespace idem {
namespace {

std::string Hex(const std::array<std::uint8_t, 32>& bytes) {
  RecordId id;
  id.bytes = bytes;
  return id.ToHex();
}

// The same construction spelled out independently of the implementation.
std::string Reference(std::string_view scope, std::string_view key) {
  std::string msg;
  for (int shift = 56; shift >= 0; shift -= 8) {
    msg.push_back(static_cast<char>((scope.size() >> shift) & 0xFF));
  }
  msg.append(scope);
  msg.append(key);
  return Hex(Sha256(msg));
}

TEST(RecordIdTest, KnownVectors) {
  // Computed with Python's hashlib over the documented construction.
  EXPECT_EQ(MakeRecordId("", "abc").ToHex(),
            "f3652e4ce938bb9965f62c3ca4d8f69301a6c85b1e86eac67e291152d3c0e3dd");
  EXPECT_EQ(
      MakeRecordId("tenant-a", "8e03978e-40d5-43e8-bc93-6894a57f9324").ToHex(),
      "b50247efe486cae7286283c96ded757f1bab6bb73b4b019644a92482b0112cee");
}

TEST(RecordIdTest, MatchesReferenceConstruction) {
  const std::pair<std::string, std::string> cases[] = {
      {"", ""},
      {"", "k"},
      {"s", ""},
      {"tenant/alice", "key-1"},
      {std::string(300, 's'), std::string(255, 'k')},
      {std::string("a\0b", 3), std::string("\0\0", 2)},
  };
  for (const auto& [scope, key] : cases) {
    EXPECT_EQ(MakeRecordId(scope, key).ToHex(), Reference(scope, key))
        << scope.size() << "/" << key.size();
  }
}

TEST(RecordIdTest, LengthPrefixSeparatesScopeFromKey) {
  EXPECT_NE(MakeRecordId("ab", "c"), MakeRecordId("a", "bc"));
  EXPECT_NE(MakeRecordId("", "abc"), MakeRecordId("abc", ""));
  EXPECT_NE(MakeRecordId("a", "bc"), MakeRecordId("", "abc"));
}

TEST(RecordIdTest, ScopeIsolatesKeys) {
  EXPECT_NE(MakeRecordId("alice", "k"), MakeRecordId("bob", "k"));
  EXPECT_NE(MakeRecordId("", "k"), MakeRecordId("alice", "k"));
  EXPECT_EQ(MakeRecordId("alice", "k"), MakeRecordId("alice", "k"));
}

TEST(RecordIdTest, IsNotAPlainHashOfTheKey) {
  // Without the prefix an anonymous id would equal SHA-256(key), which
  // anyone could precompute for a guessed key.
  EXPECT_NE(Hex(MakeRecordId("", "abc").bytes), Hex(Sha256("abc")));
}

TEST(RecordIdTest, SameAcrossThreads) {
  const RecordId expected = MakeRecordId("tenant", "key");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (MakeRecordId("tenant", "key") != expected) ++mismatches[t];
        // Interleave other digests on the same thread-local machinery.
        (void)MakeRecordId("x" + std::to_string(i), "y");
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace idem
