// The framing rules of idem/asio/request_framing.h on RESTinio 0.6, whose
// HTTP parser (http-parser) accepts requests Beast's refuses (bare LF line
// ends, obs-fold, whitespace before a colon, HTTP/1.2, ...) and closes the
// connection without an answer on the ones it refuses itself.
//
// RESTinio offers no hook into its parser or its read path, but takes the
// socket type from its traits: FramedSocket reads through RequestFraming,
// so the parser sees only checked requests. A request the rules refuse is
// never handed on; in its place the parser gets a stand-in request that
// carries the refusal under a per-process secret, and
// AnswerFramingRejection, first in the handler chain, answers it with the
// 400 (or 431) problem Beast's server gives, with Connection: close. (The
// secret only keeps a client from choosing the problem its own request is
// answered with; it guards nothing else.) What
// the client sends after it is read and discarded until RESTinio closes.
// A request refused inside its chunked body (after its header was handed
// on) cannot be answered so: its connection is closed.
//
//   struct Traits : restinio::traits_t<restinio::asio_timer_manager_t,
//                                      restinio::null_logger_t, Chain,
//                                      restinio::default_strand_t,
//                                      idem::restinio::FramedSocket> {};
//   // The chain's first handler (IdempotentHandler::ChainHandler also
//   // answers it first, so a chain that starts with it needs nothing more):
//   [](const RequestHandle& r) {
//     if (idem::restinio::AnswerFramingRejection(*r))
//       return restinio::request_accepted();
//     ...
//   }
//
// Thread-safety: FramedSocket as a socket (RESTinio's strand);
// AnswerFramingRejection from any thread.

#ifndef IDEM_RESTINIO_FRAMING_H_
#define IDEM_RESTINIO_FRAMING_H_

#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <restinio/request_handler.hpp>
#include <restinio/tls_fwd.hpp>

#include "idem/asio/framed_stream.h"

namespace idem::restinio {

// The stand-in request for a refusal (FramedStream's Replacement).
struct FramingStandIn {
  static std::optional<std::string> Bytes(
      const ::idem::asio::FramingRejection& rejection);
};

// A TCP socket as RESTinio uses one, read through the framing rules.
class FramedSocket
    : public ::idem::asio::FramedStream<boost::asio::ip::tcp::socket,
                                        FramingStandIn> {
 public:
  explicit FramedSocket(boost::asio::io_context& ioc) : FramedStream(ioc) {}

  auto& lowest_layer() { return next_layer().lowest_layer(); }
  const auto& lowest_layer() const { return next_layer().lowest_layer(); }
  auto remote_endpoint() const { return next_layer().remote_endpoint(); }
  bool is_open() const { return next_layer().is_open(); }
  template <class... Args>
  void cancel(Args&&... args) {
    next_layer().cancel(std::forward<Args>(args)...);
  }
  // After a refusal, what the client sent and nobody read is discarded
  // first: closing a socket with unread data resets the connection, which
  // can destroy the answer on its way.
  template <class... Args>
  void shutdown(Args&&... args) {
    DiscardUnread();
    next_layer().shutdown(std::forward<Args>(args)...);
  }
  template <class... Args>
  void close(Args&&... args) {
    DiscardUnread();
    next_layer().close(std::forward<Args>(args)...);
  }

 private:
  // Reads without blocking, and drops, what has arrived (at most 16 MiB),
  // when a request was refused.
  void DiscardUnread();
};

// RESTinio's connection finds these for its socket type by argument-
// dependent lookup: a plain TCP connection needs no preparation, and is
// not TLS.
template <class Connection, class Start, class Failed>
void prepare_connection_and_start_read(FramedSocket&, Connection&, Start start,
                                       Failed) {
  start();
}
inline ::restinio::tls_socket_t* make_tls_socket_pointer_for_state_listener(
    FramedSocket&) noexcept {
  return nullptr;
}

// True when `request` is FramedSocket's stand-in for a refused request: it
// was answered with the refusal's problem (its instance the refused
// request's path, when it had one) and Connection: close. False for every
// other request (a client cannot forge the stand-in: it does not know the
// secret).
bool AnswerFramingRejection(::restinio::request_t& request);

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_FRAMING_H_
