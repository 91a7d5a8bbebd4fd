// libpq's binary format for the PostgreSQL store's parameters and results:
// record blobs go over the wire as they are, without hex escaping, and
// integers are big-endian.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_BINARY_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_BINARY_H_

#include <libpq-fe.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace idem::postgres_internal {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// An int8 parameter. Returned by value: the caller keeps it alive while a
// string_view of it is sent.
inline std::array<char, 8> BigEndian64(std::int64_t v) {
  std::array<char, 8> out;
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(u >> (56 - 8 * i));
  return out;
}

inline std::string_view View(const std::array<char, 8>& bytes) {
  return {bytes.data(), bytes.size()};
}

// A one-dimensional array parameter in binary format (the layout of
// PostgreSQL's array_send: dimensions, element type, then each element as
// its length and its bytes), without NULLs: `count` elements of
// `element_type`, each given by Add.
class BinaryArray {
 public:
  BinaryArray(Oid element_type, std::size_t count, std::size_t element_bytes) {
    bytes_.reserve(20 + count * (4 + element_bytes));
    Put32(1);  // Dimensions.
    Put32(0);  // No NULLs.
    Put32(element_type);
    Put32(static_cast<std::uint32_t>(count));
    Put32(1);  // Lower bound.
  }
  void Add(std::string_view element) {
    Put32(static_cast<std::uint32_t>(element.size()));
    bytes_.append(element);
  }
  void Add(std::int64_t v) { Add(View(BigEndian64(v))); }
  std::string_view view() const { return bytes_; }

 private:
  void Put32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      bytes_.push_back(static_cast<char>(v >> (24 - 8 * i)));
  }
  std::string bytes_;
};

// A signed big-endian integer of `size` bytes (an int2, int4 or int8 cell).
inline std::int64_t ReadBigEndian(const char* p, int size) {
  std::uint64_t u = 0;
  for (int i = 0; i < size; ++i) {
    u = (u << 8) | static_cast<unsigned char>(p[i]);
  }
  if (size < 8 && size > 0 && (u >> (8 * size - 1)) != 0) {
    u |= ~std::uint64_t{0} << (8 * size);  // Sign-extend.
  }
  return static_cast<std::int64_t>(u);
}

// A cell of a binary-format result.
inline std::string_view Cell(const PGresult* r, int row, int column) {
  return {PQgetvalue(r, row, column),
          static_cast<std::size_t>(PQgetlength(r, row, column))};
}

inline std::int64_t IntCell(const PGresult* r, int row, int column) {
  return ReadBigEndian(PQgetvalue(r, row, column), PQgetlength(r, row, column));
}

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_BINARY_H_
