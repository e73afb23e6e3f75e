//===- JSONLocate.cpp - Where a JSON text goes wrong, and where values are ===//
//
// A recursive-descent scanner (RFC 8259) that builds nothing: it runs only
// after simdjson refused a text (to say what is wrong and where) or when an
// error message asks for a value's position. Its rules are simdjson's:
// numbers must fit in int64_t, uint64_t or a double, and surrogates come in
// pairs.
//
//===----------------------------------------------------------------------===//

#include "JSONLocate.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

using namespace llvm;
using namespace oasr::detail;

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// One step of the key path to a value at fault: an object key or an array
/// index.
struct PathStep {
  StringRef key;
  size_t index = 0;
  bool isIndex = false;
};

/// Reads the text without building values. It stops at the first error
/// (`message`, `stopOffset`, `path`, innermost step first) or, given a
/// `target`, at the start of value number `target` in document order
/// (`stopOffset`, `message` empty).
class Scanner {
public:
  Scanner(StringRef text, unsigned maxDepth, std::optional<uint32_t> target)
      : begin(text.begin()), p(begin), end(text.end()), maxDepth(maxDepth),
        target(target) {}

  /// Scans the whole text; false at an error or at the target.
  bool document() {
    skipSpace();
    if (!value(0))
      return false;
    skipSpace();
    if (p != end)
      return fail(p, "text after the end of the document");
    return true;
  }

  std::string message;
  size_t stopOffset = 0;
  std::vector<PathStep> path;

private:
  bool fail(const char *at, const Twine &msg) {
    message = msg.str();
    stopOffset = at - begin;
    return false;
  }

  /// Counts the value starting at `p`; false when it is the target.
  bool reach() {
    if (target && seen == *target) {
      stopOffset = p - begin;
      return false;
    }
    ++seen;
    return true;
  }

  void skipSpace() {
    while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
      ++p;
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
    case '"':
      return reach() && string();
    case 't':
      return literal("true");
    case 'f':
      return literal("false");
    case 'n':
      return literal("null");
    default:
      if (*p == '-' || isDigit(*p))
        return reach() && number();
      return fail(p, "expected a value");
    }
  }

  bool literal(StringRef word) {
    if (!StringRef(p, end - p).starts_with(word))
      return fail(p, "expected a value");
    if (!reach())
      return false;
    p += word.size();
    return true;
  }

  bool array(unsigned depth) {
    return container(depth, ']', "an array element",
                     [&](size_t i, std::optional<PathStep> &step) {
                       step = PathStep{StringRef(), i, true};
                       return value(depth);
                     });
  }

  bool object(unsigned depth) {
    return container(depth, '}', "an object member",
                     [&](size_t, std::optional<PathStep> &step) {
                       if (p == end || *p != '"')
                         return fail(p, "expected a string key in an object");
                       const char *key = p + 1;
                       if (!reach() || !string())
                         return false;
                       // The key as written (escapes not decoded).
                       step = PathStep{StringRef(key, p - 1 - key), 0, false};
                       skipSpace();
                       if (p == end || *p != ':')
                         return fail(p, "expected ':' after an object key");
                       ++p;
                       skipSpace();
                       return value(depth);
                     });
  }

  /// An array or object from its opening bracket to `close`. `item` reads
  /// element (or member) `i` and names it in `step`, which a stop inside it
  /// or at the separator after it adds to `path`.
  template <typename Item>
  bool container(unsigned depth, char close, const char *what, Item item) {
    if (depth > maxDepth)
      return fail(p, "arrays and objects nest deeper than " + Twine(maxDepth) +
                         " levels");
    if (!reach())
      return false;
    ++p;
    skipSpace();
    if (p != end && *p == close) {
      ++p;
      return true;
    }
    for (size_t i = 0;; ++i) {
      std::optional<PathStep> step;
      if (item(i, step)) {
        skipSpace();
        if (p != end && *p == close) {
          ++p;
          return true;
        }
        if (p != end && *p == ',') {
          ++p;
          skipSpace();
          continue;
        }
        fail(p, Twine("expected ',' or '") + Twine(close) + "' after " + what);
      }
      if (step)
        path.push_back(*step);
      return false;
    }
  }

  /// A string starting at the quote `p`, left after its closing quote.
  bool string() {
    const char *open = p++;
    const char *start = p;
    bool nonASCII = false;
    for (; p != end; ++p) {
      unsigned char c = *p;
      if (c == '"') {
        StringRef raw(start, p - start);
        ++p;
        size_t bad = 0;
        // Escapes are ASCII: the raw bytes are UTF-8 iff the string is.
        if (nonASCII && !json::isUTF8(raw, &bad))
          return fail(start + std::min(bad, raw.size()),
                      "invalid UTF-8 in a string");
        return true;
      }
      if (c < 0x20)
        return fail(p, "control character in a string (write it as an "
                       "escape such as \\n)");
      if (c == '\\') {
        if (p + 1 == end)
          break;
        if (!escape())
          return false;
        continue;
      }
      nonASCII |= c >= 0x80;
    }
    return fail(open, "unterminated string");
  }

  /// The escape at the backslash `p`, leaving `p` on its last character.
  bool escape() {
    const char *esc = p++;
    switch (*p) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      return true;
    case 'u':
      break;
    default:
      return fail(esc, "invalid escape '\\" + Twine(*p) + "' in a string");
    }
    uint32_t cp = 0;
    if (!hex4(esc, cp))
      return false;
    auto isHigh = [](uint32_t c) { return c >= 0xD800 && c <= 0xDBFF; };
    auto isLow = [](uint32_t c) { return c >= 0xDC00 && c <= 0xDFFF; };
    if (!isHigh(cp) && !isLow(cp))
      return true;
    if (isHigh(cp) && end - p >= 7 && p[1] == '\\' && p[2] == 'u') {
      const char *low = p + 1;
      p += 2;
      uint32_t lo = 0;
      if (!hex4(low, lo))
        return false;
      if (isLow(lo))
        return true;
    }
    return fail(esc, "invalid \\u escape (a surrogate must be one half of a "
                     "high-low pair)");
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
    return inRange(start, integral);
  }

  /// simdjson's ranges: an integer literal fits in int64_t or uint64_t, any
  /// other number in a double.
  bool inRange(const char *start, bool integral) {
    if (integral) {
      int64_t i;
      uint64_t u;
      if (std::from_chars(start, p, i).ec == std::errc() ||
          (*start != '-' && std::from_chars(start, p, u).ec == std::errc()))
        return true;
      return fail(start, "invalid number (an integer must fit in 64 bits; "
                         "write a larger one with an exponent)");
    }
    SmallString<64> copy(StringRef(start, p - start));
    if (std::isfinite(std::strtod(copy.c_str(), nullptr)))
      return true;
    return fail(start, "invalid number (beyond the range of a double)");
  }

  const char *begin, *p, *end;
  unsigned maxDepth;
  std::optional<uint32_t> target;
  uint32_t seen = 0;
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

std::optional<JSONSyntaxError>
oasr::detail::findJSONSyntaxError(StringRef text, unsigned maxDepth) {
  Scanner scanner(text, maxDepth, std::nullopt);
  if (scanner.document())
    return std::nullopt;
  return JSONSyntaxError{scanner.message, scanner.stopOffset,
                         spellPath(scanner.path)};
}

size_t oasr::detail::findJSONValueOffset(StringRef text, uint32_t ordinal,
                                         unsigned maxDepth) {
  Scanner scanner(text, maxDepth, ordinal);
  scanner.document();
  return scanner.stopOffset;
}
