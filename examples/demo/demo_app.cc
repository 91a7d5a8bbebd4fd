#include "demo_app.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "idem/beast/convert.h"
#include "idem/problem.h"

namespace idem::demo {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using beast::Request;
using beast::Response;
using beast::ToStd;

std::string Sanitize(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (safe) out += c;
  }
  return out;
}

std::uint64_t RandomNonce() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

// The value of `name` in the query of `target` ("a=1&b=2"), undecoded.
std::optional<std::string_view> QueryParam(std::string_view target,
                                           std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view()
                                         : rest.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view()
                                          : pair.substr(eq + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ParseUint(std::string_view s) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    return std::nullopt;
  }
  return v;
}

std::string Json(const nlohmann::ordered_json& j) {
  // A request body that is not UTF-8 must not throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response Make(const Request& request, unsigned status,
              std::string_view content_type, std::string body) {
  Response res;
  res.version(request.version());
  res.result(status);
  res.set(http::field::content_type,
          boost::beast::string_view(content_type.data(), content_type.size()));
  res.body() = std::move(body);
  res.keep_alive(request.keep_alive());
  res.prepare_payload();
  return res;
}

Response ProblemAnswer(const Request& request, unsigned status,
                       std::string_view code, std::string detail) {
  // 1xx, 204 and 304 answers have no body (RFC 9110 §15.3.5, §15.4.5): the
  // status alone, no Content-Type, no Content-Length.
  if (status < 200 || status == 204 || status == 304) {
    Response res;
    res.version(request.version());
    res.result(status);
    res.keep_alive(request.keep_alive());
    beast::PreparePayload(res);
    return res;
  }
  Problem problem;
  problem.status = static_cast<int>(status);
  problem.code = code;
  problem.detail = std::move(detail);
  const std::string_view target = ToStd(request.target());
  problem.instance = target.substr(0, target.find('?'));
  return beast::ToBeast(MakeProblemResponse(problem), request.version(),
                        request.keep_alive());
}

}  // namespace

DemoApp::DemoApp(std::string instance, std::function<std::string()> metrics,
                 std::size_t max_order_bytes, std::function<bool()> protection)
    : instance_(std::move(instance)),
      id_prefix_(Sanitize(instance_)),
      metrics_(std::move(metrics)),
      protection_(std::move(protection)),
      nonce_(RandomNonce()),
      max_order_bytes_(max_order_bytes) {}

std::string DemoApp::NewOrderId() {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016llx-%llu",
                static_cast<unsigned long long>(nonce_),
                static_cast<unsigned long long>(
                    next_id_.fetch_add(1, std::memory_order_relaxed)));
  return id_prefix_.empty() ? std::string(buf) : id_prefix_ + "-" + buf;
}

asio::awaitable<Response> DemoApp::Handle(Request request) {
  const std::string_view target = ToStd(request.target());
  const std::string_view path = target.substr(0, target.find('?'));
  const http::verb method = request.method();
  constexpr std::string_view kOrders = "/orders/";
  if (path == "/orders" || path == "/payments") {
    if (method == http::verb::post) {
      co_return co_await CreateOrder(std::move(request));
    }
  } else if (path.size() > kOrders.size() && path.starts_with(kOrders) &&
             path.find('/', kOrders.size()) == std::string_view::npos) {
    if (method == http::verb::get) {
      co_return GetOrder(request, path.substr(kOrders.size()));
    }
  } else if (path == "/stats") {
    if (method == http::verb::get) {
      nlohmann::ordered_json j;
      j["handler_runs"] = handler_runs();
      if (protection_) j["protection"] = protection_() ? "on" : "off";
      co_return Make(request, 200, "application/json", Json(j));
    }
  } else if (path == "/metrics") {
    if (method == http::verb::get) {
      co_return Make(request, 200, "text/plain; version=0.0.4",
                     metrics_ ? metrics_() : std::string());
    }
  } else {
    co_return ProblemAnswer(request, 404, "not_found",
                            "There is nothing at this path.");
  }
  Response res = ProblemAnswer(request, 405, "method_not_allowed",
                               "This path does not accept this method.");
  res.set(http::field::allow,
          path == "/orders" || path == "/payments" ? "POST" : "GET");
  co_return res;
}

asio::awaitable<Response> DemoApp::CreateOrder(Request request) {
  handler_runs_.fetch_add(1, std::memory_order_relaxed);
  const std::string_view target = ToStd(request.target());

  if (auto delay = QueryParam(target, "delay_ms")) {
    const auto ms = ParseUint(*delay);
    if (!ms || *ms > kMaxDelayMs) {
      co_return ProblemAnswer(request, 400, "demo_bad_query",
                              "delay_ms must be a whole number of "
                              "milliseconds up to " +
                                  std::to_string(kMaxDelayMs) + ".");
    }
    // A timer, not a sleep: the I/O thread serves others meanwhile.
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::milliseconds(*ms));
    co_await timer.async_wait(asio::use_awaitable);
  }
  if (auto fail = QueryParam(target, "fail"); fail && *fail == "throw") {
    throw std::runtime_error("demo handler failed as asked (fail=throw)");
  }
  if (auto status = QueryParam(target, "status")) {
    const auto code = ParseUint(*status);
    if (!code || *code < 200 || *code > 599) {
      co_return ProblemAnswer(request, 400, "demo_bad_query",
                              "status must be an HTTP status from 200 to 599.");
    }
    co_return ProblemAnswer(request, static_cast<unsigned>(*code),
                            "demo_status",
                            "The demo answered the status it was asked for.");
  }

  const std::string id = NewOrderId();
  nlohmann::ordered_json j;
  j["id"] = id;
  j["instance"] = instance_;
  j["request"] = request.body();
  std::string body = Json(j);
  KeepOrder(id, body);
  Response res = Make(request, 201, "application/json", std::move(body));
  res.set(http::field::location, "/orders/" + id);
  res.set("X-Demo-Instance", instance_);
  res.set(http::field::set_cookie, "demo=1");
  co_return res;
}

void DemoApp::KeepOrder(const std::string& id, const std::string& body) {
  auto size_of = [](const std::string& key, const std::string& value) {
    return key.size() + value.size() + kOrderOverhead;
  };
  const std::size_t size = size_of(id, body);
  // Not even kept for a moment: the copy alone would be the growth.
  if (size > max_order_bytes_) return;
  std::lock_guard lock(mu_);
  orders_.emplace(id, body);
  order_ids_.push_back(id);
  order_bytes_ += size;
  while (order_ids_.size() > kMaxOrders || order_bytes_ > max_order_bytes_) {
    auto oldest = orders_.find(order_ids_.front());
    order_bytes_ -= size_of(oldest->first, oldest->second);
    orders_.erase(oldest);
    order_ids_.pop_front();
  }
}

Response DemoApp::GetOrder(const Request& request, std::string_view id) {
  std::string body;
  {
    std::lock_guard lock(mu_);
    auto it = orders_.find(std::string(id));
    if (it != orders_.end()) body = it->second;
  }
  if (body.empty()) {
    return ProblemAnswer(request, 404, "order_not_found",
                         "There is no order with this id.");
  }
  return Make(request, 200, "application/json", std::move(body));
}

}  // namespace idem::demo
