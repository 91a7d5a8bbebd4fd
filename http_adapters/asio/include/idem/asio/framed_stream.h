// FramedStream: a stream whose reads hand on only what RequestFraming
// (request_framing.h) has checked, the framing rules every idem adapter's
// server holds requests to, before its HTTP parser sees a byte.
//
// Reads complete with the checked bytes. Once a request is refused they
// complete with FramingError::kRefused (after every byte before it), and
// rejection() says why: a Beast session answers that with the 400 or 431
// problem. A server whose parser offers no way to answer from the read path
// (RESTinio) gives `Replacement`: Replacement::Bytes(rejection) returns the
// bytes handed on in place of a request refused at its start (a request
// the server's first handler answers with the problem), or nullopt; after
// them, reads discard what the client still sends (so that closing does
// not reset the connection under the answer) until the server closes.
//
// Writes go straight to the next layer.
//
// Thread-safety: as the next layer's (one read at a time).

#ifndef IDEM_ASIO_FRAMED_STREAM_H_
#define IDEM_ASIO_FRAMED_STREAM_H_

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include "idem/asio/request_framing.h"

namespace idem::asio {

enum class FramingError { kRefused = 1 };

// The category of FramingError ("idem.framing").
const boost::system::error_category& FramingErrorCategory();

inline boost::system::error_code make_error_code(FramingError e) {
  return {static_cast<int>(e), FramingErrorCategory()};
}

// No replacement: a refused request ends the reads with kRefused.
struct NoReplacement {
  static std::optional<std::string> Bytes(const FramingRejection&) {
    return std::nullopt;
  }
};

template <class NextLayer, class Replacement = NoReplacement>
class FramedStream {
 public:
  using executor_type = typename NextLayer::executor_type;
  using next_layer_type = NextLayer;

  template <class... Args>
  explicit FramedStream(Args&&... args) : next_(std::forward<Args>(args)...) {}
  FramedStream(FramedStream&&) = default;
  FramedStream& operator=(FramedStream&&) = default;

  NextLayer& next_layer() { return next_; }
  const NextLayer& next_layer() const { return next_; }
  executor_type get_executor() { return next_.get_executor(); }

  // Why the request being read was refused, once it was.
  const FramingRejection* rejection() const {
    return state_ && state_->framing.rejection() ? &*state_->framing.rejection()
                                                 : nullptr;
  }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    if (!state_) state_ = std::make_unique<State>();
    return boost::asio::async_compose<Token, void(boost::system::error_code,
                                                  std::size_t)>(
        ReadOp<MutableBuffers>{this, buffers}, token, next_);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return next_.async_write_some(buffers, std::forward<Token>(token));
  }

 private:
  // Drained after a replacement, at most, before reads fail.
  static constexpr std::size_t kDrainLimit = std::size_t{16} << 20;

  // On the heap: moved with the stream, and a moved-from stream (RESTinio
  // reuses its accept sockets so) starts afresh.
  struct State {
    RequestFraming framing;
    // One read from the next layer: RESTinio's own read buffer is 4 KiB;
    // this costs 8 KiB per open connection.
    std::array<char, 8 * 1024> chunk;
    std::string replacement;  // Not yet handed on.
    bool replaced = false;    // Replacement::Bytes was asked.
    bool drain = false;       // It gave bytes: discard the rest.
    std::size_t drained = 0;
  };

  template <class MutableBuffers>
  struct ReadOp {
    FramedStream* stream;
    MutableBuffers buffers;
    enum { kStart, kReading, kPosted, kDraining } step = kStart;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {},
                    std::size_t n = 0) {
      State& s = *stream->state_;
      switch (step) {
        case kStart:
          if (boost::asio::buffer_size(buffers) == 0 || HasOutput(s)) {
            // Never complete inside the initiating call.
            step = kPosted;
            boost::asio::post(stream->next_.get_executor(), std::move(self));
            return;
          }
          step = kReading;
          stream->next_.async_read_some(boost::asio::buffer(s.chunk),
                                        std::move(self));
          return;
        case kReading:
          if (ec) {
            self.complete(ec, 0);
            return;
          }
          s.framing.Append(std::string_view(s.chunk.data(), n));
          if (!HasOutput(s)) {
            stream->next_.async_read_some(boost::asio::buffer(s.chunk),
                                          std::move(self));
            return;
          }
          break;
        case kPosted:
          break;
        case kDraining:
          s.drained += n;
          if (ec || s.drained > kDrainLimit) {
            self.complete(ec ? ec : make_error_code(FramingError::kRefused), 0);
            return;
          }
          stream->next_.async_read_some(boost::asio::buffer(s.chunk),
                                        std::move(self));
          return;
      }
      Deliver(self, s);
    }

    static bool HasOutput(const State& s) {
      return !s.framing.Ready().empty() || !s.replacement.empty() ||
             s.framing.rejection();
    }

    template <class Self>
    void Deliver(Self& self, State& s) {
      if (boost::asio::buffer_size(buffers) == 0) {
        self.complete({}, 0);
        return;
      }
      if (const std::string_view ready = s.framing.Ready(); !ready.empty()) {
        const std::size_t n = boost::asio::buffer_copy(
            buffers, boost::asio::buffer(ready.data(), ready.size()));
        s.framing.Consume(n);
        self.complete({}, n);
        return;
      }
      const FramingRejection& rejection = *s.framing.rejection();
      if (!s.replaced && rejection.at_request_start) {
        s.replaced = true;
        if (auto bytes = Replacement::Bytes(rejection)) {
          s.replacement = std::move(*bytes);
          s.drain = true;
        }
      }
      if (!s.replacement.empty()) {
        const std::size_t n = boost::asio::buffer_copy(
            buffers, boost::asio::buffer(s.replacement));
        s.replacement.erase(0, n);
        self.complete({}, n);
        return;
      }
      if (s.drain) {
        step = kDraining;
        stream->next_.async_read_some(boost::asio::buffer(s.chunk),
                                      std::move(self));
        return;
      }
      self.complete(make_error_code(FramingError::kRefused), 0);
    }
  };

  NextLayer next_;
  std::unique_ptr<State> state_;
};

}  // namespace idem::asio

namespace boost::system {
template <>
struct is_error_code_enum<::idem::asio::FramingError> : std::true_type {};
}  // namespace boost::system

#endif  // IDEM_ASIO_FRAMED_STREAM_H_
