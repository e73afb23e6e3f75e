//===- JSONTest.cpp - The JSON reader against llvm::json, and its errors --===//

#include "oasr/Support/JSON.h"

#include "llvm/Support/FormatVariadic.h"
#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>

using namespace oasr;

namespace {

std::string errorOf(llvm::StringRef text, unsigned maxDepth = kMaxJSONDepth) {
  llvm::Expected<JSONDocument> doc =
      JSONDocument::parse(text, "f.json", maxDepth);
  if (doc)
    return "<no error>";
  return llvm::toString(doc.takeError());
}

/// Reads `text` with both readers: both accept it with equal values, or both
/// refuse it.
void expectSameAsLLVM(const std::string &text) {
  llvm::Expected<llvm::json::Value> want = llvm::json::parse(text);
  llvm::Expected<JSONDocument> got = JSONDocument::parse(text, "f.json");
  ASSERT_EQ(bool(want), bool(got))
      << "input: " << text
      << "\nllvm::json: " << (want ? "ok" : llvm::toString(want.takeError()))
      << "\nJSONDocument: " << (got ? "ok" : llvm::toString(got.takeError()));
  if (!want) {
    llvm::consumeError(want.takeError());
    llvm::consumeError(got.takeError());
    return;
  }
  EXPECT_EQ(got->root().toLLVM(), *want) << "input: " << text;
}

TEST(JSON, AgreesWithLLVMOnHandWrittenDocuments) {
  for (const char *text :
       {"{}", "[]", " [ ] ", "null", "true", "false", "0", "-0", "12", "-7",
        "1.5", "-2.25e-3", "1E5", "1e+2", "9223372036854775807",
        "-9223372036854775808", "9223372036854775808", "18446744073709551615",
        "1e-400", R"("")", R"("a\"b\\c\/d\b\f\n\r\t")",
        R"("\u00e9\u4e2d\ud83d\ude00")", "\"caf\xc3\xa9\"",
        R"({"a": 1, "a": 2})", R"("a\u0000b")",
        R"({"a": [1, {"b": null}], "c": {"d": [true, false]}})", "[1,2,3]",
        "\t\r\n[\n1\n]\n",
        // Refused by both.
        "", " ", "[", "]", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{1: 2}",
        "[1 2]", "tru", "nul", "[true false]", "\"abc", "\"a\x01\"", R"("\x")",
        R"("\u12")", R"("\u12G4")", "1 2", "[] x", "-", "--1", "1e", "1e+",
        "\"\xff\"", "\"\xc3\"", "[\"a\"]]", "{\"a\":}",
        // Invalid UTF-8 before and after an escape (found by the
        // profile fuzzer: the bytes before the first escape went
        // unchecked).
        "\"\xe5rh\\\\x\"", "\"x\\\\\xe5rh\""}) {
    SCOPED_TRACE(text);
    expectSameAsLLVM(text);
  }
}

TEST(JSON, AgreesWithLLVMOnRandomDocuments) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    switch (depth > 3 ? pick(4) : pick(6)) {
    case 0:
      return llvm::formatv("{0}", int64_t(rng()) - (1ll << 31)).str();
    case 1:
      return llvm::formatv("{0:e}", double(rng()) / 1000.0 - 2e6).str();
    case 2: {
      static const char *strs[] = {"\"x\"", "\"conv1.weight\"", "\"a\\nb\"",
                                   "\"\\u0041\"", "\"\""};
      return strs[pick(5)];
    }
    case 3:
      return pick(2) ? "true" : "null";
    case 4: {
      std::string s = "[";
      for (int i = 0, n = pick(4); i < n; ++i)
        s += (i ? ", " : "") + gen(depth + 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      for (int i = 0, n = pick(4); i < n; ++i)
        s += llvm::formatv("{0}\"k{1}\": {2}", i ? ", " : "", pick(3),
                           gen(depth + 1))
                 .str();
      return s + "}";
    }
    }
  };
  for (int i = 0; i < 300; ++i) {
    std::string text = gen(0);
    SCOPED_TRACE(text);
    expectSameAsLLVM(text);
    // Cut short, it must be refused by both (or still read the same).
    expectSameAsLLVM(text.substr(0, text.size() / 2));
  }
}

TEST(JSON, NumbersReadLikeLLVM) {
  for (const char *text :
       {"4", "4.0", "1e3", "-3", "4.5", "1e30", "9223372036854775807",
        "9223372036854775808", "1e-400"}) {
    SCOPED_TRACE(text);
    llvm::Expected<llvm::json::Value> want = llvm::json::parse(text);
    llvm::Expected<JSONDocument> got = JSONDocument::parse(text, "f.json");
    ASSERT_TRUE(bool(want) && bool(got));
    EXPECT_EQ(got->root().getAsInteger(), want->getAsInteger());
    EXPECT_EQ(got->root().getAsNumber(), want->getAsNumber());
  }
}

TEST(JSON, StrictWhereLLVMIsLenient) {
  // llvm::json hands these to strtod/strtoll, which accept them; RFC 8259
  // does not.
  EXPECT_NE(errorOf("01").find("leading zeros are not allowed"),
            std::string::npos);
  EXPECT_NE(errorOf("[1.]").find("a digit must follow '.'"), std::string::npos);
  EXPECT_NE(errorOf("+1").find("expected a value"), std::string::npos);
  EXPECT_NE(errorOf(".5").find("expected a value"), std::string::npos);
}

TEST(JSON, StrictWhereSimdjsonIs) {
  // llvm::json reads these as a double, infinity or U+FFFD; simdjson
  // refuses them, and the scanner says why.
  EXPECT_EQ(errorOf("[18446744073709551616]"),
            "f.json: invalid JSON: invalid number (an integer must fit in 64 "
            "bits; write a larger one with an exponent) (at byte 1), line 1 "
            "column 2, in [0]");
  EXPECT_NE(errorOf("-9223372036854775809").find("must fit in 64 bits"),
            std::string::npos);
  EXPECT_EQ(errorOf("{\"a\": 1e400}"),
            "f.json: invalid JSON: invalid number (beyond the range of a "
            "double) (at byte 6), line 1 column 7, in a");
  for (const char *lone :
       {R"("\ud83d")", R"("\ude00x")", R"("\ud83dx")", R"("\ud83d\u0041")"})
    EXPECT_EQ(errorOf(lone), "f.json: invalid JSON: invalid \\u escape (a "
                             "surrogate must be one half of a high-low pair) "
                             "(at byte 1), line 1 column 2")
        << lone;
  EXPECT_EQ(errorOf(R"("\ud83d\ude00")"), "<no error>");
}

TEST(JSON, AccessorsAndIteration) {
  llvm::Expected<JSONDocument> doc = JSONDocument::parse(
      R"({"a": [1, "two", [3], {"x": null}], "b": true, "a2": {}})", "f.json");
  ASSERT_TRUE(bool(doc)) << llvm::toString(doc.takeError());
  JSONValue root = doc->root();
  EXPECT_TRUE(root.isObject());
  EXPECT_EQ(root.size(), 3u);
  std::optional<JSONValue> a = root.get("a");
  ASSERT_TRUE(a && a->isArray());
  EXPECT_EQ(a->size(), 4u);
  std::vector<JSONValue::Kind> kinds;
  for (JSONValue e : a->elements())
    kinds.push_back(e.kind());
  EXPECT_EQ(kinds, (std::vector<JSONValue::Kind>{
                       JSONValue::Kind::Number, JSONValue::Kind::String,
                       JSONValue::Kind::Array, JSONValue::Kind::Object}));
  std::vector<std::string> keys;
  for (auto [k, v] : root.members())
    keys.push_back(k.str());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "a2"}));
  EXPECT_EQ(root.get("b")->getAsBoolean(), true);
  EXPECT_FALSE(root.get("missing"));
  EXPECT_FALSE(a->get("a")) << "an array has no members";
  EXPECT_TRUE(a->members().empty());
  EXPECT_TRUE(root.elements().empty()) << "an object has no elements";
  EXPECT_EQ(root.get("a2")->size(), 0u);
  EXPECT_EQ(a->offset(), 6u);
  EXPECT_EQ(a->position(), "line 1 column 7");
  EXPECT_EQ(root.offset(), 0u);
  EXPECT_EQ(root.get("b")->offset(), 41u);
  EXPECT_EQ(root.get("a2")->position(), "line 1 column 54");
  // Values stay valid when the document moves.
  JSONDocument moved = std::move(*doc);
  EXPECT_EQ(a->size(), 4u);
  EXPECT_EQ(moved.root().get("a")->size(), 4u);
}

/// Checks that every value's offset() points at its first character.
void expectOffsetsMatch(const std::string &text) {
  llvm::Expected<JSONDocument> doc = JSONDocument::parse(text, "f.json");
  ASSERT_TRUE(bool(doc)) << llvm::toString(doc.takeError());
  std::function<void(JSONValue)> visit = [&](JSONValue v) {
    ASSERT_LT(v.offset(), text.size());
    char c = text[v.offset()];
    switch (v.kind()) {
    case JSONValue::Kind::Null:
      EXPECT_EQ(c, 'n');
      break;
    case JSONValue::Kind::Boolean:
      EXPECT_EQ(c, *v.getAsBoolean() ? 't' : 'f');
      break;
    case JSONValue::Kind::Number:
      EXPECT_TRUE(c == '-' || (c >= '0' && c <= '9')) << c;
      break;
    case JSONValue::Kind::String:
      EXPECT_EQ(text.compare(v.offset() + 1, v.getAsString()->size(),
                             v.getAsString()->str()),
                0)
          << "a string without escapes";
      break;
    case JSONValue::Kind::Array:
      EXPECT_EQ(c, '[');
      for (JSONValue e : v.elements())
        visit(e);
      break;
    case JSONValue::Kind::Object:
      EXPECT_EQ(c, '{');
      for (auto [k, m] : v.members()) {
        // The member's value follows its key and a colon.
        llvm::StringRef before = llvm::StringRef(text).take_front(m.offset());
        EXPECT_TRUE(before.rtrim().ends_with(":")) << k.str();
        visit(m);
      }
      break;
    }
  };
  visit(doc->root());
}

TEST(JSON, OffsetsFollowTheText) {
  expectOffsetsMatch(R"( {"x": [1, -2.5e3, true, false, null],
    "y": {"z": "w", "e": [], "o": {}}, "k": [[["deep"]]]} )");
  expectOffsetsMatch("[\"a\", {\"b\": [0, {\"c\": null}]}, 7]");
}

TEST(JSON, ParseJSONOwnsItsKeysAndStrings) {
  // The document (and simdjson's string buffer) is gone when parseJSON
  // returns; parse another text over the freed memory before reading.
  std::string text = "{";
  for (int i = 0; i < 200; ++i)
    text += llvm::formatv("{0}\"key{1}\": \"value{1}\"", i ? ", " : "", i);
  text += "}";
  llvm::Expected<llvm::json::Value> v = parseJSON(text, "m.json");
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  std::string other(text.size(), ' ');
  other.front() = '[';
  other.back() = ']';
  ASSERT_TRUE(bool(JSONDocument::parse(other, "o.json")));
  const llvm::json::Object *o = v->getAsObject();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->size(), 200u);
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(o->getString(llvm::formatv("key{0}", i).str()),
              llvm::formatv("value{0}", i).str());
}

TEST(JSON, ErrorsNamePositionAndKeyPath) {
  EXPECT_EQ(errorOf("{\"layers\": [\n  {\"name\": \"a\"},\n  {\"name\" "
                    "\"b\"}]}"),
            "f.json: invalid JSON: expected ':' after an object key (at byte "
            "40), line 3 column 11, in layers[1].name");
  EXPECT_EQ(errorOf("{\"a\": [1, 2\n  3]}"),
            "f.json: invalid JSON: expected ',' or ']' after an array element "
            "(at byte 14), line 2 column 3, in a[1]");
  EXPECT_EQ(errorOf("[] []"), "f.json: invalid JSON: text after the end of "
                              "the document (at byte 3), line 1 column 4");
  EXPECT_EQ(errorOf("{\"a\": \"x"), "f.json: invalid JSON: unterminated "
                                    "string (at byte 6), line 1 column 7, "
                                    "in a");
  EXPECT_EQ(errorOf("[\"\\q\"]"), "f.json: invalid JSON: invalid escape "
                                  "'\\q' in a string (at byte 2), line 1 "
                                  "column 3, in [0]");
  EXPECT_EQ(errorOf(""), "f.json: invalid JSON: unexpected end of input, "
                         "expected a value (at byte 0), line 1 column 1");
}

TEST(JSON, NestingIsBoundedWithoutRecursingPastTheLimit) {
  // 1,000,000 levels: a recursive parser without the bound overflows the
  // stack long before; this one stops at the limit.
  std::string deep(1000000, '[');
  EXPECT_EQ(errorOf(deep), "f.json: invalid JSON: arrays and objects nest "
                           "deeper than 256 levels (at byte 256), line 1 "
                           "column 257, in [0][0][0][0][0][0][0][0]... (248 "
                           "more levels)");
  std::string ok = std::string(4, '[') + std::string(4, ']');
  EXPECT_EQ(errorOf(ok, 4), "<no error>");
  EXPECT_NE(errorOf(ok, 3).find("nest deeper than 3 levels (at byte 3)"),
            std::string::npos);
  // parseJSON, the llvm::json view, has the same bound.
  llvm::Expected<llvm::json::Value> v = parseJSON(deep, "m.json");
  ASSERT_FALSE(bool(v));
  EXPECT_NE(llvm::toString(v.takeError()).find("m.json: invalid JSON: arrays"),
            std::string::npos);
}

TEST(JSON, NonFiniteNumbersAreWrittenAsStrings) {
  // llvm::json prints a bare `-inf`, which no JSON parser accepts.
  llvm::json::Value v = llvm::json::Object{
      {"mask", llvm::json::Array{0.0, -INFINITY, 1.5}},
      {"loss", std::nan("")},
      {"nested", llvm::json::Object{{"big", INFINITY}, {"n", int64_t(3)}}}};
  std::string text = formatJSON(v);
  EXPECT_EQ(text, R"({"loss":"NaN","mask":[0,"-Infinity",1.5],)"
                  R"("nested":{"big":"Infinity","n":3}})");
  // What is written is JSON, for oasr's own reader too.
  llvm::Expected<llvm::json::Value> back = parseJSON(text, "w.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(*back->getAsObject()->getString("loss"), "NaN");
  EXPECT_EQ(formatJSON(llvm::json::Array{1.0}, 2), "[\n  1\n]");
}

} // namespace
