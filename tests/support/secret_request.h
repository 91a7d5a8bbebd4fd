// For the tests that search a store's files or rows for what it must never
// write (SEMANTICS.md: no raw key, scope or body in a store): a request
// whose key, scope and body are strings found nowhere else, run through a
// Guard over the store under test, and a search of every file under a
// directory.

#ifndef IDEM_TESTS_SUPPORT_SECRET_REQUEST_H_
#define IDEM_TESTS_SUPPORT_SECRET_REQUEST_H_

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/store.h"

namespace idem::testing {

inline constexpr std::string_view kSecretKey = "zebra-kite-7f3a9c-unmistakable";
inline constexpr std::string_view kSecretScope = "tenant-orca-91b2";
inline constexpr std::string_view kSecretBody = "{\"secret-body\":1}";
// The handler's response body: stored, so it must be found.
inline constexpr std::string_view kStoredBody = "made-response";

// Sends the secret request twice through a Guard over `store` (time from
// `clock`); expects (gtest) one handler run and a replay the second time.
// Returns the Guard, which holds the store: reset it to close the store.
std::shared_ptr<Guard> RunSecretRequestTwice(std::shared_ptr<Store> store,
                                             std::shared_ptr<Clock> clock);

// Expects (gtest) that `bytes` (a store's files or rows) hold the stored
// response body but none of the secret key, scope and request body.
void ExpectNoSecretIn(const std::string& bytes);

// Every byte of every regular file under `dir`, concatenated.
std::string ReadAllFiles(const std::filesystem::path& dir);

// For an embedded store keeping its files under `dir`: runs the secret
// request twice over `store` and expects (gtest) no secret in the files
// while the store is open (logs: RocksDB's write-ahead log, SQLite's WAL),
// then again after it is closed (releases `store`; the data then sits in
// its final files).
void ExpectNoSecretInFilesOpenAndClosed(std::shared_ptr<Store> store,
                                        std::shared_ptr<Clock> clock,
                                        const std::filesystem::path& dir);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_SECRET_REQUEST_H_
