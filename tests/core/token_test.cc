// Fencing tokens (SEMANTICS.md, "Terms": 128 random bits from a fork-safe
// CSPRNG; no two processes, forked or not, draw the same).

#include "idem/token.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace idem {
namespace {

constexpr int kTokens = 256;

std::vector<Token> Draw(int n) {
  std::vector<Token> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(NewToken());
  return tokens;
}

TEST(TokenTest, TokensDiffer) {
  std::set<std::array<unsigned char, 16>> seen;
  for (const Token& t : Draw(10000)) {
    std::array<unsigned char, 16> bytes;
    std::memcpy(bytes.data(), t.bytes.data(), 16);
    EXPECT_TRUE(seen.insert(bytes).second);
  }
}

TEST(TokenTest, ParentAndForkedChildDrawDifferentTokens) {
  // Draw first, so that any per-thread generator state exists before fork.
  Draw(4);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    const std::vector<Token> mine = Draw(kTokens);
    const char* p = reinterpret_cast<const char*>(mine.data());
    std::size_t left = mine.size() * sizeof(Token);
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n <= 0) _exit(1);
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  const std::vector<Token> parent = Draw(kTokens);
  std::vector<Token> child(kTokens);
  char* p = reinterpret_cast<char*>(child.data());
  std::size_t got = 0;
  const std::size_t want = child.size() * sizeof(Token);
  while (got < want) {
    const ssize_t n = read(fds[0], p + got, want - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, want);
  int same = 0;
  for (const Token& c : child) {
    same += static_cast<int>(std::count(parent.begin(), parent.end(), c));
  }
  EXPECT_EQ(same, 0) << "parent and child drew " << same << " equal tokens";
}

}  // namespace
}  // namespace idem
