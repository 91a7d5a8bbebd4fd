// A completed record's response as the memory store keeps it: one block of
// the store's own memory (memory_record_memory.h) holding the status, the
// headers and the body, shared by the versions of the record's chain
// through a reference count.
//
// Why not the caller's std::shared_ptr<const Response>: its control block,
// header strings and body are blocks of the process's heap that live as long
// as the record, and records in that heap slow every request's allocations
// (memory_record_memory.h). A replay or an Inspect gets a Response made
// from the block (ToResponse): one allocation for the response and one for
// a body of more than 15 bytes, short-lived, and the record shares nothing
// with the caller.
//
// Thread-safety: a StoredResponse is a value; copies of one may be made and
// destroyed from any threads at once (the count is atomic), and the block
// they share is never modified after Make.

#ifndef IDEM_BACKENDS_MEMORY_STORED_RESPONSE_H_
#define IDEM_BACKENDS_MEMORY_STORED_RESPONSE_H_

#include <cstddef>
#include <memory>
#include <utility>

#include "idem/response.h"

namespace idem::memory_internal {

class StoredResponse {
 public:
  StoredResponse() = default;
  StoredResponse(const StoredResponse& other) noexcept;
  StoredResponse(StoredResponse&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)) {}
  StoredResponse& operator=(StoredResponse other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~StoredResponse();

  // A copy of `response` in a new block, recording `charge` (the bytes the
  // store charged for it). Throws std::bad_alloc.
  static StoredResponse Make(const Response& response, std::size_t charge);

  explicit operator bool() const { return block_ != nullptr; }
  // The bytes charged at Make; 0 when empty.
  std::size_t charge() const;
  // A new Response equal to the one given to Make; null when empty. Throws
  // std::bad_alloc.
  std::shared_ptr<const Response> ToResponse() const;

 private:
  struct Block;
  Block* block_ = nullptr;
};

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_STORED_RESPONSE_H_
