// Assertions on idem::Result<T> and idem::Status (idem/error.h) that print
// the error when they fail:
//
//   EXPECT_THAT(store->Revoke(id), IsOk());
//   EXPECT_THAT(OpenStore("nope:"), HasErrorCode(ErrorCode::kInvalidArgument));
//   ASSERT_OK_AND_ASSIGN(auto store, OpenStore("memory:"));
//   auto guard = ValueOrThrow(Guard::Create(...));  // Where ASSERT cannot.

#ifndef IDEM_TESTING_STATUS_MATCHERS_H_
#define IDEM_TESTING_STATUS_MATCHERS_H_

#include <stdexcept>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/error.h"

namespace idem::testing {

// Matches a Result or Status that holds a value.
MATCHER(IsOk, negation ? "fails" : "holds a value") {
  if (arg.has_value()) return true;
  *result_listener << "fails with " << arg.error().ToString();
  return false;
}

// Matches a Result or Status that fails with `code`.
MATCHER_P(HasErrorCode, code,
          std::string(negation ? "does not fail with " : "fails with ") +
              std::string(ErrorCodeName(code))) {
  if (arg.has_value()) {
    *result_listener << "holds a value";
    return false;
  }
  *result_listener << "fails with " << arg.error().ToString();
  return arg.error().code() == code;
}

// The value of `result`; throws std::runtime_error with the error otherwise.
// For constructors and helpers that cannot use ASSERT_*.
template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result) throw std::runtime_error(result.error().ToString());
  return std::move(*result);
}
inline void ValueOrThrow(const Status& status) {
  if (!status) throw std::runtime_error(status.error().ToString());
}

}  // namespace idem::testing

// Fails the current test (and returns from it) unless `expr`, a Result,
// holds a value, which is then moved into `lhs` (a declaration such as
// `auto x`, or an existing variable).
#define ASSERT_OK_AND_ASSIGN(lhs, expr)   \
  IDEM_TESTING_ASSERT_OK_AND_ASSIGN_IMPL( \
      IDEM_TESTING_CONCAT(idem_testing_result_, __LINE__), lhs, expr)
#define IDEM_TESTING_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                           \
  ASSERT_THAT(tmp, ::idem::testing::IsOk());                   \
  lhs = std::move(*tmp)
#define IDEM_TESTING_CONCAT(a, b) IDEM_TESTING_CONCAT_INNER(a, b)
#define IDEM_TESTING_CONCAT_INNER(a, b) a##b

#endif  // IDEM_TESTING_STATUS_MATCHERS_H_
