// Tests of Idempotency-Key header parsing (SEMANTICS.md step 2): one row per
// rule, plus the order in which rules apply when several are broken.

#include "idem/idempotency_key.h"

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace idem {
namespace {

using namespace std::string_literals;

struct KeyCase {
  const char* name;
  std::string input;
  // Exactly one of the two is meaningful: ok ? key : error.
  bool ok;
  std::string key;
  KeyError error = KeyError::kEmpty;
};

KeyCase Ok(const char* name, std::string input, std::string key) {
  return {name, std::move(input), true, std::move(key)};
}
KeyCase Err(const char* name, std::string input, KeyError error) {
  return {name, std::move(input), false, "", error};
}

// Names the row in failure messages instead of dumping its bytes.
void PrintTo(const KeyCase& c, std::ostream* os) { *os << c.name; }

std::vector<KeyCase> Cases() {
  return {
      // Accepted forms.
      Ok("bare", "abc", "abc"),
      Ok("bare_uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324",
         "8e03978e-40d5-43e8-bc93-6894a57f9324"),
      Ok("bare_trimmed", " \t abc \t ", "abc"),
      Ok("bare_inner_space_kept", "a b  c", "a b  c"),
      Ok("bare_comma_kept", "a, b", "a, b"),
      Ok("bare_single_char", "x", "x"),
      Ok("bare_all_printable_except_quote_backslash",
         " !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`"
         "abcdefghijklmnopqrstuvwxyz{|}~",
         "!#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`"
         "abcdefghijklmnopqrstuvwxyz{|}~"),
      Ok("quoted", "\"abc\"", "abc"),
      Ok("quoted_trimmed", "\t \"abc\"  ", "abc"),
      Ok("quoted_keeps_inner_space", "\" a b \"", " a b "),
      Ok("quoted_escaped_quote", R"("a\"b")", "a\"b"),
      Ok("quoted_escaped_backslash", R"("a\\b")", "a\\b"),
      Ok("quoted_only_escapes", R"("\"\\")", "\"\\"),
      Ok("quoted_escaped_backslash_before_close", R"("ab\\")", "ab\\"),
      Ok("quoted_same_key_as_bare", "\"8e03978e\"", "8e03978e"),

      // kEmpty.
      Err("empty", "", KeyError::kEmpty),
      Err("only_spaces", "   ", KeyError::kEmpty),
      Err("only_tabs_and_spaces", "\t \t", KeyError::kEmpty),
      Err("quoted_empty", "\"\"", KeyError::kEmpty),
      Err("quoted_empty_trimmed", "  \"\"\t", KeyError::kEmpty),

      // kInvalidCharacter: bytes outside 0x20-0x7E anywhere.
      Err("inner_tab", "a\tb", KeyError::kInvalidCharacter),
      Err("del", "ab\x7f", KeyError::kInvalidCharacter),
      Err("nul", "ab\0cd"s, KeyError::kInvalidCharacter),
      Err("newline", "ab\ncd", KeyError::kInvalidCharacter),
      Err("carriage_return", "ab\r", KeyError::kInvalidCharacter),
      Err("utf8", "caf\xc3\xa9", KeyError::kInvalidCharacter),
      Err("high_byte", "\xff", KeyError::kInvalidCharacter),
      Err("control_inside_quotes", "\"ab\x01\"", KeyError::kInvalidCharacter),
      Err("utf8_inside_quotes", "\"caf\xc3\xa9\"", KeyError::kInvalidCharacter),
      Err("tab_inside_quotes", "\"a\tb\"", KeyError::kInvalidCharacter),
      // Rule order: a bad byte wins over bad quoting and over length.
      Err("invalid_beats_bad_quoting", "\"ab\x01", KeyError::kInvalidCharacter),
      Err("invalid_beats_too_long", std::string(300, 'a') + "\x01",
          KeyError::kInvalidCharacter),

      // kBadQuoting.
      Err("unterminated", "\"abc", KeyError::kBadQuoting),
      Err("lone_quote", "\"", KeyError::kBadQuoting),
      Err("unterminated_after_escaped_quote", R"("abc\")",
          KeyError::kBadQuoting),
      Err("trailing_backslash", "\"abc\\", KeyError::kBadQuoting),
      Err("escape_n", R"("a\nb")", KeyError::kBadQuoting),
      Err("escape_u", R"("\u0041")", KeyError::kBadQuoting),
      Err("escape_slash", R"("a\/b")", KeyError::kBadQuoting),
      Err("text_after_quote", "\"abc\"x", KeyError::kBadQuoting),
      Err("space_then_text_after_quote", "\"abc\" x", KeyError::kBadQuoting),
      Err("two_quoted_folded", "\"a\", \"b\"", KeyError::kBadQuoting),
      Err("sf_parameter_after_quote", "\"abc\";p=1", KeyError::kBadQuoting),
      Err("bare_with_quote_inside", "ab\"c", KeyError::kBadQuoting),
      Err("bare_with_quote_at_end", "abc\"", KeyError::kBadQuoting),
      Err("bare_with_backslash", "ab\\c", KeyError::kBadQuoting),
      // Rule order: quoting is judged before emptiness and length.
      Err("bad_quoting_beats_too_long", "\"" + std::string(300, 'a'),
          KeyError::kBadQuoting),
  };
}

class ParseKeyTest : public testing::TestWithParam<KeyCase> {};

TEST_P(ParseKeyTest, Parses) {
  const KeyCase& c = GetParam();
  const auto got = ParseIdempotencyKey(c.input);
  if (c.ok) {
    ASSERT_TRUE(got.has_value()) << KeyErrorName(got.error());
    EXPECT_EQ(*got, c.key);
  } else {
    ASSERT_FALSE(got.has_value()) << "parsed as '" << *got << "'";
    EXPECT_EQ(got.error(), c.error) << "want " << KeyErrorName(c.error)
                                    << ", got " << KeyErrorName(got.error());
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, ParseKeyTest, testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ParseKeyLengthTest, LimitIsOnTheUnquotedKey) {
  const std::string max(kDefaultMaxKeyLength, 'k');
  EXPECT_EQ(ParseIdempotencyKey(max).value(), max);
  EXPECT_EQ(ParseIdempotencyKey(max + "k").error(), KeyError::kTooLong);
  EXPECT_EQ(ParseIdempotencyKey("\"" + max + "\"").value(), max);
  EXPECT_EQ(ParseIdempotencyKey("\"" + max + "k\"").error(),
            KeyError::kTooLong);
  // Surrounding whitespace does not count.
  EXPECT_EQ(ParseIdempotencyKey("  " + max + "\t").value(), max);

  // 255 escaped quotes: 512 bytes on the wire, 255 after unescaping.
  std::string escaped = "\"";
  for (std::size_t i = 0; i < kDefaultMaxKeyLength; ++i) escaped += "\\\"";
  escaped += "\"";
  EXPECT_EQ(ParseIdempotencyKey(escaped).value(),
            std::string(kDefaultMaxKeyLength, '"'));
  escaped.insert(1, "x");
  EXPECT_EQ(ParseIdempotencyKey(escaped).error(), KeyError::kTooLong);
}

TEST(ParseKeyLengthTest, CustomLimit) {
  EXPECT_EQ(ParseIdempotencyKey("abcd", 4).value(), "abcd");
  EXPECT_EQ(ParseIdempotencyKey("abcde", 4).error(), KeyError::kTooLong);
  EXPECT_EQ(ParseIdempotencyKey("\"abcde\"", 4).error(), KeyError::kTooLong);
  EXPECT_EQ(ParseIdempotencyKey(R"("a\"c\\")", 4).value(), "a\"c\\");
  EXPECT_EQ(ParseIdempotencyKey("a", 0).error(), KeyError::kTooLong);
  // Empty is reported as empty, not as too long, whatever the limit.
  EXPECT_EQ(ParseIdempotencyKey("", 0).error(), KeyError::kEmpty);
}

// Every single byte as a whole bare value lands in exactly the class the
// rules give it.
TEST(ParseKeyBytesTest, EverySingleByte) {
  for (int b = 0; b < 256; ++b) {
    const std::string value(1, static_cast<char>(b));
    const auto got = ParseIdempotencyKey(value);
    SCOPED_TRACE("byte " + std::to_string(b));
    if (b == ' ' || b == '\t') {
      EXPECT_EQ(got.error(), KeyError::kEmpty);
    } else if (b < 0x20 || b > 0x7E) {
      EXPECT_EQ(got.error(), KeyError::kInvalidCharacter);
    } else if (b == '"' || b == '\\') {
      EXPECT_EQ(got.error(), KeyError::kBadQuoting);
    } else {
      EXPECT_EQ(got.value(), value);
    }
  }
}

TEST(ParseKeyHeadersTest, ExactlyOneValue) {
  const std::vector<std::string_view> none;
  EXPECT_EQ(ParseIdempotencyKeyHeaders(none).error(), KeyError::kEmpty);

  const std::vector<std::string_view> one = {" \"k-1\" "};
  EXPECT_EQ(ParseIdempotencyKeyHeaders(one).value(), "k-1");

  const std::vector<std::string_view> two_equal = {"k-1", "k-1"};
  EXPECT_EQ(ParseIdempotencyKeyHeaders(two_equal).error(),
            KeyError::kDuplicate);

  // Duplicate is decided before either value is looked at.
  const std::vector<std::string_view> two_bad = {"", "\x01"};
  EXPECT_EQ(ParseIdempotencyKeyHeaders(two_bad).error(), KeyError::kDuplicate);

  const std::vector<std::string_view> one_bad = {"\"x"};
  EXPECT_EQ(ParseIdempotencyKeyHeaders(one_bad).error(), KeyError::kBadQuoting);

  const std::vector<std::string_view> long_one = {"abcde"};
  EXPECT_EQ(ParseIdempotencyKeyHeaders(long_one, 4).error(),
            KeyError::kTooLong);
}

TEST(KeyErrorTextTest, NamesAreStableAndDistinct) {
  EXPECT_EQ(KeyErrorName(KeyError::kEmpty), "empty");
  EXPECT_EQ(KeyErrorName(KeyError::kTooLong), "too_long");
  EXPECT_EQ(KeyErrorName(KeyError::kInvalidCharacter), "invalid_character");
  EXPECT_EQ(KeyErrorName(KeyError::kBadQuoting), "bad_quoting");
  EXPECT_EQ(KeyErrorName(KeyError::kDuplicate), "duplicate");
}

TEST(KeyErrorTextTest, DetailsAreDistinctSentences) {
  const KeyError all[] = {KeyError::kEmpty, KeyError::kTooLong,
                          KeyError::kInvalidCharacter, KeyError::kBadQuoting,
                          KeyError::kDuplicate};
  std::set<std::string_view> seen;
  for (const KeyError e : all) {
    const std::string_view detail = KeyErrorDetail(e);
    SCOPED_TRACE(std::string(KeyErrorName(e)));
    EXPECT_TRUE(seen.insert(detail).second) << "detail reused";
    ASSERT_GT(detail.size(), 20u);
    EXPECT_EQ(detail.back(), '.');
    EXPECT_NE(detail.find("Idempotency-Key"), std::string_view::npos);
    for (const char c : detail) {
      EXPECT_TRUE(c >= 0x20 && c <= 0x7E) << "non-printable in detail";
    }
  }
}

}  // namespace
}  // namespace idem
