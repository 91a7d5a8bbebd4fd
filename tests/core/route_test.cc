// Route patterns and tables (route.h): what any adapter protects.

#include "idem/route.h"

#include <memory>

#include <gtest/gtest.h>

namespace idem {
namespace {

TEST(RoutePatternTest, Matches) {
  struct Case {
    const char* pattern;
    const char* path;
    bool match;
  };
  for (const Case& c : {
           Case{"/orders", "/orders", true},
           Case{"/orders", "/orders/", false},
           Case{"/orders", "/orders/1", false},
           Case{"/orders", "/order", false},
           Case{"/orders/{id}", "/orders/1", true},
           Case{"/orders/{id}", "/orders/", false},
           Case{"/orders/{id}", "/orders/1/items", false},
           Case{"/t/{tenant}/orders/{id}", "/t/a/orders/7", true},
           Case{"/t/{tenant}/orders/{id}", "/t/a/carts/7", false},
           Case{"/api/*", "/api", true},
           Case{"/api/*", "/api/", true},
           Case{"/api/*", "/api/v1/orders", true},
           Case{"/api/*", "/apix", false},
           Case{"/*", "/anything/at/all", true},
           Case{"/", "/", true},
           Case{"/", "/x", false},
       }) {
    auto p = RoutePattern::Parse(c.pattern);
    ASSERT_TRUE(p.has_value()) << c.pattern;
    EXPECT_EQ(p->Matches(c.path), c.match) << c.pattern << " vs " << c.path;
  }
  for (const char* bad : {"", "orders", "/a/*/b", "/{}", "/{id", "/a{id}"}) {
    auto p = RoutePattern::Parse(bad);
    ASSERT_FALSE(p.has_value()) << bad;
    EXPECT_EQ(p.error().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(RouteTableTest, MatchesTheMethodAsSentAndIgnoresTheQuery) {
  RouteTable table;
  EXPECT_TRUE(table.empty());
  auto options = std::make_shared<const GuardOptions>();
  table.Add({"POST", *RoutePattern::Parse("/orders"), options});
  table.Add({"PURGE", *RoutePattern::Parse("/cache/*"), options});
  EXPECT_FALSE(table.empty());
  EXPECT_NE(table.Match("POST", "/orders?x=1"), nullptr);
  EXPECT_EQ(table.Match("PUT", "/orders"), nullptr);
  EXPECT_EQ(table.Match("POST", "/carts"), nullptr);
  // Methods are case-sensitive (RFC 9110 9.1).
  EXPECT_EQ(table.Match("post", "/orders"), nullptr);
  // An extension method is a route like any other.
  EXPECT_NE(table.Match("PURGE", "/cache/a/b"), nullptr);
}

TEST(RouteTableTest, TheFirstMatchWins) {
  RouteTable table;
  auto first = std::make_shared<const GuardOptions>();
  auto second = std::make_shared<const GuardOptions>();
  table.Add({"POST", *RoutePattern::Parse("/orders/{id}"), first});
  table.Add({"POST", *RoutePattern::Parse("/orders/*"), second});
  const Route* exact = table.Match("POST", "/orders/7");
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->options, first);
  EXPECT_EQ(exact->pattern.text(), "/orders/{id}");
  const Route* prefix = table.Match("POST", "/orders/7/items");
  ASSERT_NE(prefix, nullptr);
  EXPECT_EQ(prefix->options, second);
}

}  // namespace
}  // namespace idem
