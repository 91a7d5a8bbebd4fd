// The SQLite store's writer under the asynchronous calls (WriteAsync), with
// calls of the test's own:
//
//  - In one batch (calls queued behind a hold, asynchronous and
//    synchronous), a call that fails writes nothing and fails alone.
//  - A `done` that makes another call while the writer is destroyed: that
//    call runs in the drain or is answered "store closing", before the
//    destructor returns.
//
// Waits are for answers (a condition variable with a generous bound) or
// WaitFor polls for a state another thread reaches (calls queued).

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "async_answer.h"
#include "idem/sqlite_store_options.h"
#include "sqlite_checkpointer.h"
#include "sqlite_connection.h"
#include "sqlite_writer.h"
#include "support/sqlite_count.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using sqlite_internal::Checkpointer;
using sqlite_internal::Connection;
using sqlite_internal::Writer;
using std::chrono::seconds;
using testing::Answer;
using ::testing::HasSubstr;
using testing::WaitFor;

class SqliteAsyncWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.path = (dir_.path() / "writer.db").string();
    options_.busy_timeout = seconds(60);
    auto checkpointer = Checkpointer::Start(options_);
    ASSERT_TRUE(checkpointer) << checkpointer.error().ToString();
    checkpointer_ = std::move(*checkpointer);
    writer_ = std::make_unique<Writer>(options_, *checkpointer_);
    ASSERT_TRUE(writer_->Open());
    auto made = writer_->Write<int>("create", [](Connection& conn) {
      return conn.Exec("CREATE TABLE t (v TEXT)", "create").map([] {
        return 0;
      });
    });
    ASSERT_TRUE(made) << made.error().ToString();
  }

  // Inserts `v` into t; whether the writer was in a transaction (a batch of
  // more than one call) then, as 1 or 0.
  static auto Insert(std::string v) {
    return [v](Connection& conn) -> Result<int> {
      const std::string sql = "INSERT INTO t VALUES ('" + v + "')";
      IDEM_RETURN_IF_ERROR(conn.Exec(sql.c_str(), "insert"));
      return sqlite3_get_autocommit(conn.db()) == 0 ? 1 : 0;
    };
  }
  long long Rows() { return testing::SqliteCountRows(options_.path, "t"); }

  testing::TempDir dir_{"idem-sqlite-async-writer"};
  SqliteStoreOptions options_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Writer> writer_;
};

// Four calls queued behind a hold (three asynchronous, one synchronous
// from another thread) run in one transaction when it ends.
TEST_F(SqliteAsyncWriterTest, ACallThatFailsInABatchFailsAlone) {
  ASSERT_TRUE(writer_->Hold());
  Answer<int> a, b, c;
  writer_->WriteAsync<int>("a", Insert("a"), a.Callback());
  writer_->WriteAsync<int>(
      "b",
      [insert = Insert("b")](Connection& conn) -> Result<int> {
        IDEM_RETURN_IF_ERROR(insert(conn));
        return MakeError(ErrorCode::kInternal, "b failed");
      },
      b.Callback());
  writer_->WriteAsync<int>("c", Insert("c"), c.Callback());
  std::optional<Result<int>> d;
  std::thread sync([&] { d.emplace(writer_->Write<int>("d", Insert("d"))); });
  ASSERT_TRUE(WaitFor([&] { return writer_->queued() == 4; }));
  ASSERT_TRUE(writer_->EndHold(true));
  sync.join();
  for (Answer<int>* ok : {&a, &c}) {
    auto result = ok->Wait();
    ASSERT_TRUE(*result) << result->error().ToString();
    EXPECT_EQ(**result, 1);  // In the batch's transaction.
  }
  auto failed = b.Wait();
  ASSERT_FALSE(*failed);
  EXPECT_EQ(failed->error().message(), "b failed");
  ASSERT_TRUE(*d) << d->error().ToString();
  EXPECT_EQ(**d, 1);
  EXPECT_EQ(Rows(), 3);  // a, c and d: nothing of b.
}

// A `done` that queues another call while the writer is destroyed: the
// call runs in the drain or is answered at once with "store closing";
// either way every answer came before the destructor returned.
TEST_F(SqliteAsyncWriterTest, TheDestructorAnswersCallsMadeByCallbacks) {
  constexpr int kCalls = 100;
  Writer* writer = writer_.get();
  std::atomic<int> first{0};
  std::atomic<int> second{0};
  std::atomic<int> closing{0};
  for (int i = 0; i < kCalls; ++i) {
    writer->WriteAsync<int>(
        "first", Insert("first"), [&, writer](Result<int> result) {
          EXPECT_TRUE(result) << result.error().ToString();
          ++first;
          writer->WriteAsync<int>(
              "second", Insert("second"), [&](Result<int> again) {
                if (!again) {
                  EXPECT_EQ(again.error().code(), ErrorCode::kUnavailable);
                  EXPECT_THAT(again.error().message(),
                              HasSubstr("second: store closing"));
                  ++closing;
                }
                ++second;
              });
        });
  }
  writer_.reset();
  EXPECT_EQ(first.load(), kCalls);
  EXPECT_EQ(second.load(), kCalls);
  EXPECT_EQ(Rows(), 2 * kCalls - closing.load());
}

}  // namespace
}  // namespace idem
