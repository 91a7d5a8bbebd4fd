// IDEM_RETURN_IF_ERROR and IDEM_ASSIGN_OR_RETURN: the error leaves the
// function unchanged, a success goes on, and the expression runs once.

#include "idem/error.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace idem {
namespace {

Status Fail(int& calls) {
  ++calls;
  return MakeError(ErrorCode::kUnavailable, "down");
}
Status Succeed(int& calls) {
  ++calls;
  return {};
}
Result<std::unique_ptr<int>> MakeInt(int& calls, bool ok) {
  ++calls;
  if (!ok) return MakeError(ErrorCode::kDataLoss, "damaged");
  return std::make_unique<int>(7);
}

Result<int> Chain(int& calls, bool first_ok, bool second_ok) {
  IDEM_RETURN_IF_ERROR(first_ok ? Succeed(calls) : Fail(calls));
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<int> value, MakeInt(calls, second_ok));
  int doubled = 0;
  IDEM_ASSIGN_OR_RETURN(auto again, MakeInt(calls, true));
  doubled = *value + *again;
  return doubled;
}

Status AssignToExisting(int& calls, int& out) {
  std::unique_ptr<int> value;
  IDEM_ASSIGN_OR_RETURN(value, MakeInt(calls, true));
  out = *value;
  return {};
}

TEST(ErrorMacrosTest, ReturnIfErrorPropagatesTheErrorUnchanged) {
  int calls = 0;
  const Result<int> r = Chain(calls, /*first_ok=*/false, true);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), Error(ErrorCode::kUnavailable, "down"));
  EXPECT_EQ(calls, 1);  // Evaluated once; nothing after it ran.
}

TEST(ErrorMacrosTest, AssignOrReturnPropagatesOrMovesTheValue) {
  int calls = 0;
  const Result<int> failed = Chain(calls, true, /*second_ok=*/false);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kDataLoss);
  EXPECT_EQ(calls, 2);

  calls = 0;
  const Result<int> ok = Chain(calls, true, true);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 14);
  EXPECT_EQ(calls, 3);

  int out = 0;
  ASSERT_TRUE(AssignToExisting(calls, out).has_value());
  EXPECT_EQ(out, 7);
}

}  // namespace
}  // namespace idem
