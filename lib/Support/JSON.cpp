//===- JSON.cpp - JSON reading on simdjson, with located errors -----------===//
//
// JSONDocument::parse hands the text to simdjson's DOM parser and copies
// the DOM, in document order, into a flat tape; the JSONValue accessors read
// the tape. include/oasr/Support/JSON.h says why; when simdjson refuses a
// text, lib/Support/JSONLocate.cpp says where.
//
//===----------------------------------------------------------------------===//

#include "oasr/Support/JSON.h"
#include "JSONLocate.h"

#include "llvm/Support/FormatVariadic.h"

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace llvm;
using namespace oasr;
using Kind = JSONValue::Kind;

namespace oasr {
namespace detail {

/// How a number was written; decides what getAsInteger accepts, as in
/// llvm::json (an integer literal beyond int64_t is not an integer).
enum class NumberForm : uint8_t { Int64, UInt64, Double };

/// One value, or one object key (a String node before its value). A node's
/// index is its value's number in document order, which is how
/// findJSONValueOffset finds its text.
struct Node {
  Kind kind;
  NumberForm form;
  /// Elements of an array, members of an object, bytes of a string.
  uint32_t size;
  /// Index one past this value's subtree: the next sibling.
  uint32_t next;
  union {
    double d;
    int64_t i;
    uint64_t u;
    const char *str;
    bool b;
  };
};
static_assert(sizeof(Node) == 24, "a tape node should stay small");

struct JSONTape {
  StringRef text;
  unsigned maxDepth = kMaxJSONDepth;
  std::vector<Node> nodes;
  /// simdjson's document: its string buffer holds the decoded strings.
  simdjson::dom::document dom;

  const Node &at(uint32_t index) const { return nodes[index]; }

  std::string position(size_t offset) const {
    StringRef before = text.take_front(offset);
    size_t line = before.count('\n') + 1;
    size_t lineStart = before.rfind('\n');
    size_t column = offset - (lineStart == StringRef::npos ? 0 : lineStart + 1);
    return formatv("line {0} column {1}", line, column + 1).str();
  }
};

} // namespace detail
} // namespace oasr

using oasr::detail::JSONTape;
using oasr::detail::Node;
using oasr::detail::NumberForm;

//===----------------------------------------------------------------------===//
// From simdjson's DOM to the tape
//===----------------------------------------------------------------------===//

namespace {
/// Appends `e` and its subtree to `tape` (recursing once per level, which
/// simdjson bounded by maxDepth).
void append(JSONTape &tape, simdjson::dom::element e) {
  using simdjson::dom::element_type;
  uint32_t self = tape.nodes.size();
  Node &n = tape.nodes.emplace_back();
  n.form = NumberForm::Double;
  n.size = 0;
  n.u = 0;
  switch (e.type()) {
  case element_type::ARRAY: {
    n.kind = Kind::Array;
    uint32_t count = 0;
    // Named: value_unsafe() of a temporary result returns a reference into
    // it, which a range-for would let dangle.
    simdjson::dom::array array = e.get_array().value_unsafe();
    for (simdjson::dom::element x : array) {
      append(tape, x);
      ++count;
    }
    tape.nodes[self].size = count;
    break;
  }
  case element_type::OBJECT: {
    n.kind = Kind::Object;
    uint32_t count = 0;
    simdjson::dom::object object = e.get_object().value_unsafe();
    for (simdjson::dom::key_value_pair kv : object) {
      Node &key = tape.nodes.emplace_back();
      key.kind = Kind::String;
      key.form = NumberForm::Double;
      key.size = kv.key.size();
      key.next = tape.nodes.size();
      key.str = kv.key.data();
      append(tape, kv.value);
      ++count;
    }
    tape.nodes[self].size = count;
    break;
  }
  case element_type::STRING: {
    std::string_view s = e.get_string().value_unsafe();
    n.kind = Kind::String;
    n.size = s.size();
    n.str = s.data();
    break;
  }
  case element_type::INT64:
    n.kind = Kind::Number;
    n.form = NumberForm::Int64;
    n.i = e.get_int64().value_unsafe();
    break;
  case element_type::UINT64:
    n.kind = Kind::Number;
    n.form = NumberForm::UInt64;
    n.u = e.get_uint64().value_unsafe();
    break;
  case element_type::DOUBLE:
    n.kind = Kind::Number;
    n.d = e.get_double().value_unsafe();
    break;
  case element_type::BOOL:
    n.kind = Kind::Boolean;
    n.b = e.get_bool().value_unsafe();
    break;
  case element_type::NULL_VALUE:
    n.kind = Kind::Null;
    break;
  }
  tape.nodes[self].next = tape.nodes.size();
}

/// The message of a text simdjson refused with `code`: the scanner's, with
/// its byte, line, column and key path; simdjson's own if the scanner finds
/// nothing wrong.
std::string describe(const JSONTape &tape, simdjson::error_code code) {
  std::optional<oasr::detail::JSONSyntaxError> e =
      oasr::detail::findJSONSyntaxError(tape.text, tape.maxDepth);
  if (!e)
    return simdjson::error_message(code);
  std::string msg = e->message + " (at byte " + std::to_string(e->offset) +
                    "), " + tape.position(e->offset);
  if (!e->path.empty())
    msg += ", in " + e->path;
  return msg;
}
} // namespace

//===----------------------------------------------------------------------===//
// JSONDocument
//===----------------------------------------------------------------------===//

JSONDocument::JSONDocument(std::unique_ptr<JSONTape> tape)
    : tape(std::move(tape)) {}
JSONDocument::JSONDocument(JSONDocument &&) = default;
JSONDocument &JSONDocument::operator=(JSONDocument &&) = default;
JSONDocument::~JSONDocument() = default;

Expected<JSONDocument> JSONDocument::parse(StringRef text,
                                           StringRef fileNameForErrors,
                                           unsigned maxDepth) {
  assert(maxDepth >= 1 && "simdjson's max_depth counts the top level");
  auto invalid = [&](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(),
                             fileNameForErrors + ": invalid JSON: " + msg);
  };
  // Tape indices are 32-bit, and simdjson reads at most 4 GiB.
  if (text.size() >= std::numeric_limits<uint32_t>::max())
    return invalid("the text is 4 GiB or larger");
  auto tape = std::make_unique<JSONTape>();
  tape->text = text;
  tape->maxDepth = maxDepth;
  // The parser's buffers (a padded copy of the text, the structural
  // indices) go when it does; the document keeps the tape and strings.
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::error_code code = parser.allocate(text.size(), maxDepth);
  if (!code)
    code = parser.parse_into_document(tape->dom, text.data(), text.size())
               .get(root);
  if (code)
    return invalid(describe(*tape, code));
  // ~11 bytes of text per value in oasr's profiles: reserving one node per
  // 8 bytes avoids regrowing (untouched pages cost nothing).
  tape->nodes.reserve(text.size() / 8 + 16);
  append(*tape, root);
  return JSONDocument(std::move(tape));
}

Expected<json::Value> oasr::parseJSON(StringRef text,
                                      StringRef fileNameForErrors,
                                      unsigned maxDepth) {
  Expected<JSONDocument> doc =
      JSONDocument::parse(text, fileNameForErrors, maxDepth);
  if (!doc)
    return doc.takeError();
  return doc->root().toLLVM();
}

//===----------------------------------------------------------------------===//
// JSONValue
//===----------------------------------------------------------------------===//

Kind JSONValue::kind() const { return doc->at(index).kind; }

std::optional<double> JSONValue::getAsNumber() const {
  const Node &n = doc->at(index);
  if (n.kind != Kind::Number)
    return std::nullopt;
  switch (n.form) {
  case NumberForm::Int64:
    return double(n.i);
  case NumberForm::UInt64:
    return double(n.u);
  case NumberForm::Double:
    break;
  }
  return n.d;
}

std::optional<int64_t> JSONValue::getAsInteger() const {
  const Node &n = doc->at(index);
  if (n.kind != Kind::Number || n.form == NumberForm::UInt64)
    return std::nullopt;
  if (n.form == NumberForm::Int64)
    return n.i;
  // An integral double in range reads as an integer (1e3, 4.0).
  double whole = 0;
  if (std::modf(n.d, &whole) == 0.0 && n.d >= -9223372036854775808.0 &&
      n.d < 9223372036854775808.0)
    return int64_t(n.d);
  return std::nullopt;
}

std::optional<StringRef> JSONValue::getAsString() const {
  const Node &n = doc->at(index);
  if (n.kind != Kind::String)
    return std::nullopt;
  return StringRef(n.str, n.size);
}

std::optional<bool> JSONValue::getAsBoolean() const {
  const Node &n = doc->at(index);
  if (n.kind != Kind::Boolean)
    return std::nullopt;
  return n.b;
}

std::optional<JSONValue> JSONValue::get(StringRef key) const {
  std::optional<JSONValue> found;
  for (auto [k, v] : members())
    if (k == key)
      found = v;
  return found;
}

size_t JSONValue::size() const {
  const Node &n = doc->at(index);
  return n.kind == Kind::Array || n.kind == Kind::Object ? n.size : 0;
}

JSONValue::ElementIterator &JSONValue::ElementIterator::operator++() {
  index = doc->at(index).next;
  return *this;
}

iterator_range<JSONValue::ElementIterator> JSONValue::elements() const {
  uint32_t first = index + 1, last = doc->at(index).next;
  if (!isArray())
    first = last;
  return {ElementIterator(doc, first), ElementIterator(doc, last)};
}

std::pair<StringRef, JSONValue> JSONValue::MemberIterator::operator*() const {
  const Node &key = doc->at(index);
  return {StringRef(key.str, key.size), JSONValue(doc, index + 1)};
}

JSONValue::MemberIterator &JSONValue::MemberIterator::operator++() {
  index = doc->at(index + 1).next;
  return *this;
}

iterator_range<JSONValue::MemberIterator> JSONValue::members() const {
  uint32_t first = index + 1, last = doc->at(index).next;
  if (!isObject())
    first = last;
  return {MemberIterator(doc, first), MemberIterator(doc, last)};
}

size_t JSONValue::offset() const {
  return oasr::detail::findJSONValueOffset(doc->text, index, doc->maxDepth);
}

std::string JSONValue::position() const { return doc->position(offset()); }

json::Value JSONValue::toLLVM() const {
  const Node &n = doc->at(index);
  switch (n.kind) {
  case Kind::Null:
    return nullptr;
  case Kind::Boolean:
    return n.b;
  case Kind::Number:
    if (n.form == NumberForm::Int64)
      return n.i;
    if (n.form == NumberForm::UInt64)
      return n.u;
    return n.d;
  case Kind::String:
    return std::string(n.str, n.size);
  case Kind::Array: {
    json::Array a;
    a.reserve(n.size);
    for (JSONValue e : elements())
      a.push_back(e.toLLVM());
    return a;
  }
  case Kind::Object: {
    json::Object o;
    // An ObjectKey made from a StringRef does not own it: copy, as the keys
    // live in the document.
    for (auto [k, v] : members())
      o[json::ObjectKey(k.str())] = v.toLLVM();
    return o;
  }
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

StringRef oasr::nonFiniteJSONName(double x) {
  if (std::isnan(x))
    return "NaN";
  return x > 0 ? "Infinity" : "-Infinity";
}

/// Replaces the non-finite numbers of `v`, in place.
static void replaceNonFinite(json::Value &v) {
  if (std::optional<double> d = v.getAsNumber()) {
    if (!std::isfinite(*d))
      v = json::Value(nonFiniteJSONName(*d).str());
    return;
  }
  if (json::Array *a = v.getAsArray()) {
    for (json::Value &e : *a)
      replaceNonFinite(e);
    return;
  }
  if (json::Object *o = v.getAsObject())
    for (auto &kv : *o)
      replaceNonFinite(kv.second);
}

std::string oasr::formatJSON(json::Value value, unsigned indent) {
  replaceNonFinite(value);
  std::string text;
  raw_string_ostream os(text);
  json::OStream(os, indent).value(value);
  return text;
}
