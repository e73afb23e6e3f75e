//===- JSON.cpp - Fast JSON reading with bounded nesting ------------------===//
//
// A recursive-descent parser (RFC 8259) that writes each value into one flat
// tape, and the JSONValue accessors over it. include/oasr/Schedule/JSON.h
// says why; the number rules follow llvm::json so that reading a file gives
// the same values as before.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/JSON.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

using namespace llvm;
using namespace oasr::schedule;
using Kind = JSONValue::Kind;

namespace oasr {
namespace schedule {
namespace detail {

/// How a number was written; decides what getAsInteger accepts, as in
/// llvm::json (an integer literal beyond int64_t is not an integer).
enum class NumberForm : uint8_t { Int64, UInt64, Double };

/// One value, or one object key (a String node before its value).
struct Node {
  Kind kind;
  NumberForm form;
  /// Elements of an array, members of an object, bytes of a string.
  uint32_t size;
  /// Index one past this value's subtree: the next sibling.
  uint32_t next;
  uint32_t offset;
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
  std::vector<Node> nodes;
  /// Strings that held escapes, decoded.
  BumpPtrAllocator arena;

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
} // namespace schedule
} // namespace oasr

using oasr::schedule::detail::JSONTape;
using oasr::schedule::detail::Node;
using oasr::schedule::detail::NumberForm;

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Appends code point `cp` to `out` as UTF-8.
void appendUTF8(uint32_t cp, SmallVectorImpl<char> &out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

/// One step of the key path to a value at fault: an object key or an array
/// index.
struct PathStep {
  StringRef key;
  size_t index = 0;
  bool isIndex = false;
};

class Parser {
public:
  Parser(JSONTape &tape, unsigned maxDepth)
      : tape(tape), begin(tape.text.begin()), p(begin), end(tape.text.end()),
        maxDepth(maxDepth) {}

  /// Parses the whole text; on failure `message`, `errorOffset` and `path`
  /// (innermost step first) say what and where.
  bool document() {
    // ~11 bytes of text per value in oasr's profiles: reserving one node per
    // 8 bytes avoids regrowing (untouched pages cost nothing).
    tape.nodes.reserve(tape.text.size() / 8 + 16);
    skipSpace();
    if (!value(0))
      return false;
    skipSpace();
    if (p != end)
      return fail(p, "text after the end of the document");
    return true;
  }

  std::string message;
  size_t errorOffset = 0;
  std::vector<PathStep> path;

private:
  bool fail(const char *at, const Twine &msg) {
    message = msg.str();
    errorOffset = at - begin;
    return false;
  }

  void skipSpace() {
    while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
      ++p;
  }

  uint32_t push(Kind kind) {
    Node n;
    n.kind = kind;
    n.form = NumberForm::Double;
    n.size = 0;
    n.next = tape.nodes.size() + 1;
    n.offset = p - begin;
    n.u = 0;
    tape.nodes.push_back(n);
    return tape.nodes.size() - 1;
  }

  /// A value starting at `p`, inside `depth` arrays and objects.
  bool value(unsigned depth) {
    if (p == end)
      return fail(p, "unexpected end of input, expected a value");
    switch (*p) {
    case '{':
      return object(depth + 1);
    case '[':
      return array(depth + 1);
    case '"': {
      uint32_t n = push(Kind::String);
      StringRef s;
      if (!string(s))
        return false;
      tape.nodes[n].str = s.data();
      tape.nodes[n].size = s.size();
      return true;
    }
    case 't':
      return literal("true", Kind::Boolean, true);
    case 'f':
      return literal("false", Kind::Boolean, false);
    case 'n':
      return literal("null", Kind::Null, false);
    default:
      if (*p == '-' || isDigit(*p))
        return number();
      return fail(p, "expected a value");
    }
  }

  bool literal(StringRef word, Kind kind, bool b) {
    if (StringRef(p, end - p).starts_with(word)) {
      uint32_t n = push(kind);
      tape.nodes[n].b = b;
      p += word.size();
      return true;
    }
    return fail(p, "expected a value");
  }

  bool nestTooDeep(unsigned depth) {
    if (depth <= maxDepth)
      return false;
    return !fail(p, "arrays and objects nest deeper than " + Twine(maxDepth) +
                        " levels");
  }

  bool array(unsigned depth) {
    return container(depth, Kind::Array, ']', "an array element",
                     [&](uint32_t i, std::optional<PathStep> &step) {
                       step = PathStep{StringRef(), i, true};
                       return value(depth);
                     });
  }

  bool object(unsigned depth) {
    return container(depth, Kind::Object, '}', "an object member",
                     [&](uint32_t, std::optional<PathStep> &step) {
                       if (p == end || *p != '"')
                         return fail(p, "expected a string key in an object");
                       uint32_t keyNode = push(Kind::String);
                       StringRef key;
                       if (!string(key))
                         return false;
                       tape.nodes[keyNode].str = key.data();
                       tape.nodes[keyNode].size = key.size();
                       step = PathStep{key, 0, false};
                       skipSpace();
                       if (p == end || *p != ':')
                         return fail(p, "expected ':' after an object key");
                       ++p;
                       skipSpace();
                       return value(depth);
                     });
  }

  /// An array or object from its opening bracket to `close`. `item` reads
  /// element (or member) `i` and names it in `step`, which a failure inside
  /// it or at the separator after it adds to `path`.
  template <typename Item>
  bool container(unsigned depth, Kind kind, char close, const char *what,
                 Item item) {
    if (nestTooDeep(depth))
      return false;
    uint32_t self = push(kind);
    ++p;
    skipSpace();
    uint32_t count = 0;
    if (p != end && *p == close) {
      ++p;
    } else {
      for (;; ++count) {
        std::optional<PathStep> step;
        bool ok = item(count, step);
        if (ok) {
          skipSpace();
          if (p != end && *p == close) {
            ++p;
            ++count;
            break;
          }
          if (p != end && *p == ',') {
            ++p;
            skipSpace();
            continue;
          }
          fail(p,
               Twine("expected ',' or '") + Twine(close) + "' after " + what);
        }
        if (step)
          path.push_back(*step);
        return false;
      }
    }
    tape.nodes[self].size = count;
    tape.nodes[self].next = tape.nodes.size();
    return true;
  }

  /// A string starting at the quote `p`; `out` points into the text when it
  /// holds no escape, else into the arena.
  bool string(StringRef &out) {
    const char *open = p++;
    const char *start = p;
    bool nonASCII = false;
    for (; p != end; ++p) {
      unsigned char c = *p;
      if (c == '"') {
        out = StringRef(start, p - start);
        ++p;
        return !nonASCII || checkUTF8(start, out);
      }
      if (c == '\\')
        return escapedString(open, start, nonASCII, out);
      if (c < 0x20)
        return fail(p, "control character in a string (write it as an "
                       "escape such as \\n)");
      nonASCII |= c >= 0x80;
    }
    return fail(open, "unterminated string");
  }

  bool checkUTF8(const char *start, StringRef s) {
    size_t bad = 0;
    if (json::isUTF8(s, &bad))
      return true;
    return fail(start + std::min(bad, s.size()), "invalid UTF-8 in a string");
  }

  /// The rest of a string from the first backslash `p` on, decoded;
  /// `nonASCII` says if the bytes before it had any.
  bool escapedString(const char *open, const char *start, bool nonASCII,
                     StringRef &out) {
    SmallString<64> buf(StringRef(start, p - start));
    for (; p != end; ++p) {
      unsigned char c = *p;
      if (c == '"') {
        ++p;
        if (nonASCII) {
          size_t bad = 0;
          if (!json::isUTF8(buf, &bad))
            return fail(start, "invalid UTF-8 in a string");
        }
        char *mem = tape.arena.Allocate<char>(buf.size());
        std::memcpy(mem, buf.data(), buf.size());
        out = StringRef(mem, buf.size());
        return true;
      }
      if (c < 0x20)
        return fail(p, "control character in a string (write it as an "
                       "escape such as \\n)");
      if (c != '\\') {
        nonASCII |= c >= 0x80;
        buf.push_back(c);
        continue;
      }
      const char *esc = p++;
      if (p == end)
        break;
      switch (*p) {
      case '"':
      case '\\':
      case '/':
        buf.push_back(*p);
        break;
      case 'b':
        buf.push_back('\b');
        break;
      case 'f':
        buf.push_back('\f');
        break;
      case 'n':
        buf.push_back('\n');
        break;
      case 'r':
        buf.push_back('\r');
        break;
      case 't':
        buf.push_back('\t');
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!hex4(esc, cp))
          return false;
        // A surrogate pair makes one code point; a lone surrogate becomes
        // U+FFFD, as llvm::json reads it.
        if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 7 && p[1] == '\\' &&
            p[2] == 'u') {
          const char *low = p + 1;
          p += 2;
          uint32_t lo = 0;
          if (!hex4(low, lo))
            return false;
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else {
            appendUTF8(0xFFFD, buf);
            cp = lo >= 0xD800 && lo <= 0xDFFF ? 0xFFFD : lo;
          }
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        appendUTF8(cp, buf);
        break;
      }
      default:
        return fail(esc, "invalid escape '\\" + Twine(*p) + "' in a string");
      }
    }
    return fail(open, "unterminated string");
  }

  /// The four hex digits after "\u" (`p` at the 'u'), leaving `p` on the
  /// last of them.
  bool hex4(const char *esc, uint32_t &cp) {
    if (end - p < 5)
      return fail(esc, "invalid \\u escape (expected four hex digits)");
    cp = 0;
    for (int k = 1; k <= 4; ++k) {
      char c = p[k];
      unsigned v;
      if (isDigit(c))
        v = c - '0';
      else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v = c - 'A' + 10;
      else
        return fail(esc, "invalid \\u escape (expected four hex digits)");
      cp = cp * 16 + v;
    }
    p += 4;
    return true;
  }

  bool number() {
    const char *start = p;
    auto digits = [&] {
      const char *from = p;
      while (p != end && isDigit(*p))
        ++p;
      return p != from;
    };
    if (*p == '-')
      ++p;
    if (p == end || !isDigit(*p))
      return fail(start, "invalid number (a digit must follow '-')");
    if (*p == '0' && p + 1 != end && isDigit(p[1]))
      return fail(start, "invalid number (leading zeros are not allowed)");
    digits();
    bool integral = true;
    if (p != end && *p == '.') {
      integral = false;
      ++p;
      if (!digits())
        return fail(start, "invalid number (a digit must follow '.')");
    }
    if (p != end && (*p == 'e' || *p == 'E')) {
      integral = false;
      ++p;
      if (p != end && (*p == '+' || *p == '-'))
        ++p;
      if (!digits())
        return fail(start, "invalid number (the exponent has no digits)");
    }
    const char *stop = p;
    p = start;
    uint32_t n = push(Kind::Number);
    p = stop;
    Node &node = tape.nodes[n];
    if (integral) {
      if (std::from_chars(start, stop, node.i).ec == std::errc()) {
        node.form = NumberForm::Int64;
        return true;
      }
      if (*start != '-' &&
          std::from_chars(start, stop, node.u).ec == std::errc()) {
        node.form = NumberForm::UInt64;
        return true;
      }
    }
    node.form = NumberForm::Double;
    if (std::from_chars(start, stop, node.d).ec == std::errc())
      return true;
    // Out of range: strtod gives infinity or the nearest subnormal/zero, as
    // llvm::json reads 1e400 (rejected later as not finite).
    SmallString<64> copy(StringRef(start, stop - start));
    node.d = std::strtod(copy.c_str(), nullptr);
    return true;
  }

  JSONTape &tape;
  const char *begin, *p, *end;
  unsigned maxDepth;
};

std::string spellPath(ArrayRef<PathStep> innermostFirst) {
  std::string s;
  raw_string_ostream os(s);
  // The nesting-limit error has one step per level: name the outer ones.
  constexpr size_t kMaxSteps = 8;
  size_t shown = std::min(innermostFirst.size(), kMaxSteps);
  for (size_t k = 0; k < shown; ++k) {
    const PathStep &step = innermostFirst[innermostFirst.size() - 1 - k];
    if (step.isIndex)
      os << '[' << step.index << ']';
    else
      os << (k ? "." : "") << step.key;
  }
  if (innermostFirst.size() > shown)
    os << "... (" << innermostFirst.size() - shown << " more levels)";
  return s;
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
  auto invalid = [&](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(),
                             fileNameForErrors + ": invalid JSON: " + msg);
  };
  // Offsets and tape indices are 32-bit.
  if (text.size() >= std::numeric_limits<uint32_t>::max())
    return invalid("the text is 4 GiB or larger");
  auto tape = std::make_unique<JSONTape>();
  tape->text = text;
  Parser parser(*tape, maxDepth);
  if (!parser.document()) {
    std::string where = " (at byte " + std::to_string(parser.errorOffset) +
                        "), " + tape->position(parser.errorOffset);
    if (!parser.path.empty())
      where += ", in " + spellPath(parser.path);
    return invalid(parser.message + where);
  }
  return JSONDocument(std::move(tape));
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

size_t JSONValue::offset() const { return doc->at(index).offset; }

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
    for (auto [k, v] : members())
      o[k] = v.toLLVM();
    return o;
  }
  }
  return nullptr;
}
