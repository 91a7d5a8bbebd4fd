#include "idem/token.h"

#include <cstring>
#include <random>

#include <openssl/rand.h>

namespace idem {
namespace {

std::mt19937_64 SeededGenerator() {
  std::array<std::uint32_t, 8> seed{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(seed.data()),
                 static_cast<int>(sizeof seed)) != 1) {
    std::random_device rd;
    for (auto& s : seed) s = rd();
  }
  std::seed_seq seq(seed.begin(), seed.end());
  return std::mt19937_64(seq);
}

}  // namespace

Token NewToken() {
  thread_local std::mt19937_64 gen = SeededGenerator();
  Token t;
  const std::uint64_t a = gen();
  const std::uint64_t b = gen();
  std::memcpy(t.bytes.data(), &a, 8);
  std::memcpy(t.bytes.data() + 8, &b, 8);
  return t;
}

}  // namespace idem
