#include "memory_stored_response.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "idem/memory_store.h"
#include "memory_record_memory.h"

namespace idem::memory_internal {

// The block: this header, then per header its name's and value's sizes
// (HeaderSizes), then every name and value in order, then the body.
struct StoredResponse::Block {
  std::atomic<std::uint32_t> refs{1};
  int status = 0;
  std::size_t bytes = 0;  // The block's size, as given to RecordMemory.
  std::size_t charge = 0;
  std::size_t header_count = 0;
  std::size_t body_size = 0;

  struct HeaderSizes {
    std::size_t name;
    std::size_t value;
  };
  HeaderSizes* sizes() { return reinterpret_cast<HeaderSizes*>(this + 1); }
  const HeaderSizes* sizes() const {
    return reinterpret_cast<const HeaderSizes*>(this + 1);
  }
  char* text() { return reinterpret_cast<char*>(sizes() + header_count); }
  const char* text() const {
    return reinterpret_cast<const char*>(sizes() + header_count);
  }
};

StoredResponse::StoredResponse(const StoredResponse& other) noexcept
    : block_(other.block_) {
  if (block_ != nullptr) block_->refs.fetch_add(1, std::memory_order_relaxed);
}

StoredResponse::~StoredResponse() {
  if (block_ == nullptr) return;
  // The last owner frees: acq_rel orders every owner's reads before it.
  if (block_->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const std::size_t bytes = block_->bytes;
  block_->~Block();
  RecordMemory::Free(block_, bytes);
}

StoredResponse StoredResponse::Make(const Response& response,
                                    std::size_t charge) {
  // What MemoryStore charges a response covers its block's own parts.
  static_assert(sizeof(Block) <= MemoryStore::kResponseBytes);
  static_assert(sizeof(Block::HeaderSizes) <= MemoryStore::kHeaderBytes);
  std::size_t text = response.body.size();
  for (const Header& header : response.headers) {
    text += header.first.size() + header.second.size();
  }
  const std::size_t bytes =
      sizeof(Block) + response.headers.size() * sizeof(Block::HeaderSizes) +
      text;
  auto* block = ::new (RecordMemory::Allocate(bytes)) Block();
  block->status = response.status;
  block->bytes = bytes;
  block->charge = charge;
  block->header_count = response.headers.size();
  block->body_size = response.body.size();
  char* out = block->text();
  for (std::size_t i = 0; i < response.headers.size(); ++i) {
    const Header& header = response.headers[i];
    ::new (&block->sizes()[i])
        Block::HeaderSizes{header.first.size(), header.second.size()};
    std::memcpy(out, header.first.data(), header.first.size());
    out += header.first.size();
    std::memcpy(out, header.second.data(), header.second.size());
    out += header.second.size();
  }
  std::memcpy(out, response.body.data(), response.body.size());
  StoredResponse made;
  made.block_ = block;
  return made;
}

std::size_t StoredResponse::charge() const {
  return block_ != nullptr ? block_->charge : 0;
}

std::shared_ptr<const Response> StoredResponse::ToResponse() const {
  if (block_ == nullptr) return nullptr;
  auto response = std::make_shared<Response>();
  response->status = block_->status;
  response->headers.reserve(block_->header_count);
  const char* in = block_->text();
  for (std::size_t i = 0; i < block_->header_count; ++i) {
    const Block::HeaderSizes& sizes = block_->sizes()[i];
    std::string name(in, sizes.name);
    in += sizes.name;
    std::string value(in, sizes.value);
    in += sizes.value;
    response->headers.emplace_back(std::move(name), std::move(value));
  }
  response->body.assign(in, block_->body_size);
  return response;
}

}  // namespace idem::memory_internal
