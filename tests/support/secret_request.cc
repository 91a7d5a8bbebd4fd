#include "support/secret_request.h"

#include <fstream>
#include <iterator>
#include <utility>

#include <gtest/gtest.h>

namespace idem::testing {

std::shared_ptr<Guard> RunSecretRequestTwice(std::shared_ptr<Store> store,
                                             std::shared_ptr<Clock> clock) {
  GuardSetup setup;
  setup.store = std::move(store);
  setup.clock = std::move(clock);
  auto guard = Guard::Create(std::move(setup));
  EXPECT_TRUE(guard.has_value()) << guard.error().ToString();
  if (!guard) return nullptr;
  const HeaderView headers[] = {{"Idempotency-Key", kSecretKey}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = headers;
  request.body = kSecretBody;
  request.scope = kSecretScope;
  int runs = 0;
  auto handler = [&] {
    ++runs;
    return Response{
        201, {{"Content-Type", "text/plain"}}, std::string(kStoredBody)};
  };
  (*guard)->Run(request, handler);
  const Response replay = (*guard)->Run(request, handler);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  return std::move(*guard);
}

void ExpectNoSecretIn(const std::string& bytes) {
  EXPECT_EQ(bytes.find(kSecretKey), std::string::npos);
  EXPECT_EQ(bytes.find(kSecretScope), std::string::npos);
  EXPECT_EQ(bytes.find(kSecretBody), std::string::npos);
  EXPECT_NE(bytes.find(kStoredBody), std::string::npos) << "no record written?";
}

std::string ReadAllFiles(const std::filesystem::path& dir) {
  std::string all;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    all.append(std::istreambuf_iterator<char>(in), {});
  }
  return all;
}

void ExpectNoSecretInFilesOpenAndClosed(std::shared_ptr<Store> store,
                                        std::shared_ptr<Clock> clock,
                                        const std::filesystem::path& dir) {
  ASSERT_NE(store, nullptr);
  std::shared_ptr<Guard> guard =
      RunSecretRequestTwice(std::move(store), std::move(clock));
  ASSERT_NE(guard, nullptr);
  for (const bool closed : {false, true}) {
    SCOPED_TRACE(closed ? "closed" : "open");
    if (closed) guard.reset();  // The last reference: closes the store.
    ExpectNoSecretIn(ReadAllFiles(dir));
  }
}

}  // namespace idem::testing
