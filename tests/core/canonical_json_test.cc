// Tests of RFC 8785 (JCS) canonicalization, with the RFC's own examples.

#include "idem/canonical_json.h"

#include <bit>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace idem {
namespace {

struct JsonCase {
  const char* name;
  std::string input;
  std::string canonical;  // Empty means: rejected (nullopt).
};

// Names the row in failure messages instead of dumping its bytes.
void PrintTo(const JsonCase& c, std::ostream* os) { *os << c.name; }

std::vector<JsonCase> Cases() {
  return {
      // RFC 8785 section 3.2.2 sample (also in the RFC's test data).
      {"rfc_values",
       R"({
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
})",
       "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,"
       "4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\"
       "\\\"/\"}"},
      // RFC 8785 section 3.2.3 sorting example.
      {"rfc_sorting",
       R"({
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
})",
       "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
       "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
       "\"\xe2\x82\xac\":\"Euro Sign\","
       "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
       "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}"},
      // The RFC authors' "weird" test file: DEL and "</script>" literal.
      {"rfc_weird",
       R"({
  "\u20ac": "Euro Sign",
  "1": "One",
  "\u0080": "Control\u007f",
  "\ud83d\ude02": "Smiley",
  "\u00f6": "Latin Small Letter O With Diaeresis",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "</script>": "Browser Challenge"
})",
       "{\"1\":\"One\",\"</script>\":\"Browser Challenge\","
       "\"\xc2\x80\":\"Control\x7f\","
       "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\","
       "\"\xe2\x82\xac\":\"Euro Sign\",\"\xf0\x9f\x98\x82\":\"Smiley\","
       "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}"},

      // Structure and whitespace.
      {"whitespace", " \t\r\n{ \"b\" : [ 1 , 2 ] ,\n\"a\":{}} \n",
       R"({"a":{},"b":[1,2]})"},
      {"nested_sorting", R"({"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]})",
       R"({"a":[{"c":2,"d":1}],"z":{"x":2,"y":1}})"},
      {"array_order_kept", "[3,1,2]", "[3,1,2]"},
      {"empty_object", "{}", "{}"},
      {"empty_array", "[ ]", "[]"},
      {"top_level_string", "\"x\"", "\"x\""},
      {"top_level_number", " 1.0 ", "1"},
      {"top_level_literals", "[true,false,null]", "[true,false,null]"},
      {"utf8_bom_ignored", "\xef\xbb\xbf{\"a\":1}", R"({"a":1})"},
      {"escaped_nul_in_key", R"({"a\u0000b":1})", R"({"a\u0000b":1})"},
      {"prefix_sorts_first", R"({"ab":1,"a":2,"":3})",
       R"({"":3,"a":2,"ab":1})"},
      {"same_key_in_different_objects", R"([{"a":1},{"a":2}])",
       R"([{"a":1},{"a":2}])"},
      // UTF-16 order: U+10000 (D800 DC00) sorts before U+E000 although its
      // UTF-8 bytes (F0...) sort after (EE...).
      {"utf16_not_utf8_order", R"({"\ue000":1,"\ud800\udc00":2,"\uffff":3})",
       "{\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":1,\"\xef\xbf\xbf\":3}"},
      {"utf16_order_among_supplementary",
       R"({"\ud83d\ude01":1,"\ud83d\ude00":2})",
       "{\"\xf0\x9f\x98\x80\":2,\"\xf0\x9f\x98\x81\":1}"},
      {"below_surrogates_before_supplementary",
       R"({"\ud800\udc00":1,"\ud7ff":2})",
       "{\"\xed\x9f\xbf\":2,\"\xf0\x90\x80\x80\":1}"},

      // String escaping.
      {"escapes_short_forms", R"("\b\f\n\r\t\"\\")", R"("\b\f\n\r\t\"\\")"},
      {"escapes_other_controls", R"("\u0000\u0001\u001F\u000b")",
       R"("\u0000\u0001\u001f\u000b")"},
      {"slash_unescaped", R"("a\/b")", R"("a/b")"},
      {"unicode_literal", R"("\u00e9\u2028\u2029\uFEFF")",
       "\"\xc3\xa9\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf\""},
      {"raw_utf8_kept", "\"caf\xc3\xa9\"", "\"caf\xc3\xa9\""},
      {"del_literal", "\"\x7f\"", "\"\x7f\""},

      // Numbers: everything is an IEEE double printed as ECMAScript does.
      {"integer", "100", "100"},
      {"exponent_integer", "1E3", "1000"},
      {"trailing_zeros", "4.50", "4.5"},
      {"minus_zero_int", "-0", "0"},
      {"minus_zero_float", "-0.0", "0"},
      {"minus_zero_exp", "-0e10", "0"},
      {"negative", "-12.5", "-12.5"},
      {"small", "0.000001", "0.000001"},
      {"smaller_uses_exponent", "0.0000001", "1e-7"},
      {"small_fraction", "1.5e-7", "1.5e-7"},
      {"big_below_1e21", "123456789012345678000", "123456789012345680000"},
      {"exactly_1e21", "1e21", "1e+21"},
      {"big_fraction_exponent", "1.25e25", "1.25e+25"},
      {"max_safe", "9007199254740991", "9007199254740991"},
      {"beyond_max_safe_rounds", "9007199254740993", "9007199254740992"},
      {"int64_min", "-9223372036854775808", "-9223372036854776000"},
      {"uint64_max", "18446744073709551615", "18446744073709552000"},
      {"beyond_uint64", "123456789012345678901234567890",
       "1.2345678901234568e+29"},
      {"point_one", "0.1", "0.1"},
      {"point_three", "0.30000000000000004", "0.30000000000000004"},
      {"min_subnormal", "5e-324", "5e-324"},
      {"underflow_to_zero", "1e-400", "0"},
      {"max_double", "1.7976931348623157e308", "1.7976931348623157e+308"},

      // Rejected.
      {"empty", "", ""},
      {"only_whitespace", "  ", ""},
      {"unterminated_object", "{", ""},
      {"trailing_comma_array", "[1,]", ""},
      {"trailing_comma_object", R"({"a":1,})", ""},
      {"two_values", "1 2", ""},
      {"trailing_garbage", R"({"a":1}x)", ""},
      {"single_quotes", "'a'", ""},
      {"bare_word", "nul", ""},
      {"comment", "/* c */ 1", ""},
      {"nan", "NaN", ""},
      {"infinity", "Infinity", ""},
      {"overflow", "1e400", ""},
      {"negative_overflow", "-1e400", ""},
      {"leading_zero", "01", ""},
      {"plus_sign", "+1", ""},
      {"raw_control_in_string", "\"a\nb\"", ""},
      {"invalid_utf8", "\"\xff\"", ""},
      {"overlong_utf8", "\"\xc0\xaf\"", ""},
      {"lone_high_surrogate", R"("\ud800")", ""},
      {"lone_low_surrogate", R"("\udc00")", ""},
      {"bad_escape", R"("\x41")", ""},
      {"nul_after_value", std::string("{}\0", 3), ""},
      {"nul_then_garbage", std::string("{\"a\":1}\0{\"b\":2}", 15), ""},
      {"raw_nul_in_string", std::string("\"a\0b\"", 5), ""},
      {"duplicate_key", R"({"a":1,"a":2})", ""},
      {"duplicate_key_same_value", R"({"a":1,"b":0,"a":1})", ""},
      {"duplicate_key_nested", R"({"x":[{"a":1,"a":1}]})", ""},
      {"duplicate_key_via_escape", R"({"a":1,"\u0061":2})", ""},
  };
}

class CanonicalJsonTest : public testing::TestWithParam<JsonCase> {};

TEST_P(CanonicalJsonTest, Canonicalizes) {
  const JsonCase& c = GetParam();
  const auto got = CanonicalizeJson(c.input);
  if (c.canonical.empty()) {
    EXPECT_FALSE(got.has_value()) << "accepted as " << *got;
    return;
  }
  ASSERT_TRUE(got.has_value()) << "rejected";
  EXPECT_EQ(*got, c.canonical);
  // The canonical form is a fixed point.
  const auto again = CanonicalizeJson(*got);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *got);
}

INSTANTIATE_TEST_SUITE_P(Rfc8785, CanonicalJsonTest, testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// RFC 8785 Appendix B: IEEE 754 bit patterns and their JCS serialization.
TEST(JcsNumberTest, Rfc8785AppendixB) {
  const std::pair<std::uint64_t, const char*> vectors[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const auto& [bits, expected] : vectors) {
    const double v = std::bit_cast<double>(bits);
    EXPECT_EQ(JcsNumberToString(v), expected) << std::hex << bits;
    // And through the parser, from the text JCS itself produces.
    const auto parsed = CanonicalizeJson(expected);
    ASSERT_TRUE(parsed.has_value()) << expected;
    EXPECT_EQ(*parsed, expected);
  }
}

TEST(JcsNumberTest, LayoutBoundaries) {
  EXPECT_EQ(JcsNumberToString(1e20), "100000000000000000000");
  EXPECT_EQ(JcsNumberToString(1e21), "1e+21");
  EXPECT_EQ(JcsNumberToString(1.5e21), "1.5e+21");
  EXPECT_EQ(JcsNumberToString(123.456), "123.456");
  EXPECT_EQ(JcsNumberToString(1e-6), "0.000001");
  EXPECT_EQ(JcsNumberToString(1.5e-6), "0.0000015");
  EXPECT_EQ(JcsNumberToString(1e-7), "1e-7");
  EXPECT_EQ(JcsNumberToString(-1e-7), "-1e-7");
  EXPECT_EQ(JcsNumberToString(1e100), "1e+100");
  EXPECT_EQ(JcsNumberToString(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(JcsNumberToString(0.5), "0.5");
  EXPECT_EQ(JcsNumberToString(-0.0), "0");
  EXPECT_EQ(JcsNumberToString(std::numeric_limits<double>::quiet_NaN()),
            "null");
  EXPECT_EQ(JcsNumberToString(std::numeric_limits<double>::infinity()), "null");
}

TEST(CanonicalJsonDepthTest, LimitIsExact) {
  const std::size_t d = kMaxCanonicalJsonDepth;
  const std::string ok = std::string(d, '[') + std::string(d, ']');
  EXPECT_EQ(CanonicalizeJson(ok), ok);
  const std::string deep = "[" + ok + "]";
  EXPECT_FALSE(CanonicalizeJson(deep).has_value());
  std::string objects;
  for (std::size_t i = 0; i < d; ++i) objects += "{\"a\":";
  objects += "1" + std::string(d, '}');
  EXPECT_EQ(CanonicalizeJson(objects), objects);
}

TEST(CanonicalJsonDepthTest, VeryDeepInputIsRejectedNotACrash) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_FALSE(CanonicalizeJson(deep).has_value());
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_FALSE(CanonicalizeJson(objects).has_value());  // Also unterminated.
}

// A body of many small containers must stay linear (nlohmann's callback
// parser would rescan the parent on every close).
TEST(CanonicalJsonSizeTest, ManySiblingsAreLinear) {
  std::string body = "[";
  for (int i = 0; i < 50000; ++i) body += "{\"k\":[1]},";
  body += "{}]";
  const auto start = std::chrono::steady_clock::now();
  const auto got = CanonicalizeJson(body);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, body);
  EXPECT_LT(elapsed, std::chrono::seconds(10));
}

TEST(CanonicalJsonSizeTest, WideObjectSortedOnce) {
  std::string body = "{";
  std::string expected = "{";
  for (int i = 9999; i >= 0; --i) {
    body += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  }
  body += "\"z\":0}";
  // Byte order of "k0".."k9999" as strings.
  std::vector<std::string> keys;
  for (int i = 0; i < 10000; ++i) keys.push_back("k" + std::to_string(i));
  std::sort(keys.begin(), keys.end());
  for (const auto& k : keys) expected += "\"" + k + "\":" + k.substr(1) + ",";
  expected += "\"z\":0}";
  EXPECT_EQ(CanonicalizeJson(body), expected);
}

}  // namespace
}  // namespace idem
