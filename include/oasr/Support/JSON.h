//===- JSON.h - JSON reading on simdjson, with located errors --*- C++ -*-===//
//
// The one JSON reader of oasr's input files (profiles, calibrations,
// checkpoint manifests). simdjson (Debian's libsimdjson) parses and
// validates the text; one walk over its DOM copies every value into a flat
// tape of 24-byte nodes in document order, so that JSONValue stays a cheap
// handle with random access. Nesting is bounded (kMaxJSONDepth) by
// simdjson's max_depth, and neither simdjson (an iterative parser) nor the
// walk (bounded by it) can overflow the stack.
//
// simdjson reports only an error code. When it refuses a text, a second,
// small scanner (lib/Support/JSONLocate.cpp) runs over it to name the file,
// the byte, line and column, and the key path to the value at fault
// ("f.json: invalid JSON: expected ',' or '}' after an object member (at
// byte 212), line 9 column 7, in layers[3].grads[0]"). The same scanner
// finds a value's position for validation errors.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SUPPORT_JSON_H
#define OASR_SUPPORT_JSON_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

namespace oasr {

/// Deepest nesting of arrays and objects the reader accepts. oasr's own
/// documents nest at most 5 levels; a recursive parser recurses once per
/// level, and ~50,000 levels (a 100 KB file) would overflow an 8 MiB stack.
constexpr unsigned kMaxJSONDepth = 256;

class JSONDocument;
namespace detail {
/// The tape of a JSONDocument (lib/Support/JSON.cpp); it does not move
/// when the document does, so values stay valid.
struct JSONTape;
} // namespace detail

/// One value of a JSONDocument: a cheap handle (the document and an index
/// into its tape), valid while the document and its text live. The getters
/// follow llvm::json::Value's: getAsInteger accepts an integral number in
/// int64_t range, getAsNumber any number, and a repeated object key reads as
/// its last value.
class JSONValue {
public:
  enum class Kind : uint8_t { Null, Boolean, Number, String, Array, Object };

  Kind kind() const;
  bool isArray() const { return kind() == Kind::Array; }
  bool isObject() const { return kind() == Kind::Object; }

  std::optional<double> getAsNumber() const;
  std::optional<int64_t> getAsInteger() const;
  std::optional<llvm::StringRef> getAsString() const;
  std::optional<bool> getAsBoolean() const;

  /// The member `key` of an object (std::nullopt if absent or not an
  /// object).
  std::optional<JSONValue> get(llvm::StringRef key) const;
  /// Elements of an array, members of an object; 0 for other kinds.
  size_t size() const;

  /// Iterates an array's elements (nothing for other kinds).
  class ElementIterator;
  llvm::iterator_range<ElementIterator> elements() const;
  /// Iterates an object's members as (key, value) (nothing for other kinds).
  class MemberIterator;
  llvm::iterator_range<MemberIterator> members() const;

  /// Byte offset of the value's first character in the text. The tape does
  /// not store offsets: this rescans the text up to the value (linear in
  /// its offset), so it is meant for error messages.
  size_t offset() const;
  /// "line L column C" (1-based) of the value, for error messages (it calls
  /// offset()).
  std::string position() const;
  /// A deep copy as an llvm::json::Value (for code that walks llvm::json).
  llvm::json::Value toLLVM() const;

  friend bool operator==(JSONValue a, JSONValue b) {
    return a.doc == b.doc && a.index == b.index;
  }
  friend bool operator!=(JSONValue a, JSONValue b) { return !(a == b); }

private:
  friend class JSONDocument;
  JSONValue(const detail::JSONTape *doc, uint32_t index)
      : doc(doc), index(index) {}
  const detail::JSONTape *doc;
  uint32_t index;
};

class JSONValue::ElementIterator
    : public llvm::iterator_facade_base<
          ElementIterator, std::forward_iterator_tag, JSONValue, std::ptrdiff_t,
          JSONValue *, JSONValue> {
public:
  ElementIterator(const detail::JSONTape *doc, uint32_t index)
      : doc(doc), index(index) {}
  JSONValue operator*() const { return JSONValue(doc, index); }
  ElementIterator &operator++();
  bool operator==(const ElementIterator &o) const { return index == o.index; }

private:
  const detail::JSONTape *doc;
  uint32_t index;
};

class JSONValue::MemberIterator
    : public llvm::iterator_facade_base<
          MemberIterator, std::forward_iterator_tag,
          std::pair<llvm::StringRef, JSONValue>, std::ptrdiff_t,
          std::pair<llvm::StringRef, JSONValue> *,
          std::pair<llvm::StringRef, JSONValue>> {
public:
  MemberIterator(const detail::JSONTape *doc, uint32_t index)
      : doc(doc), index(index) {}
  std::pair<llvm::StringRef, JSONValue> operator*() const;
  MemberIterator &operator++();
  bool operator==(const MemberIterator &o) const { return index == o.index; }

private:
  const detail::JSONTape *doc;
  uint32_t index; // the key's node; the value follows it
};

/// A parsed JSON text. Its strings live in the document (simdjson's string
/// buffer); offset() and position() rescan the text it was parsed from:
/// keep the text alive as long as the document and its values.
class JSONDocument {
public:
  /// Parses `text`, read from `fileNameForErrors`, accepting arrays and
  /// objects nested at most `maxDepth` deep. Errors start with
  /// "FILE: invalid JSON: " and end with the byte, line and column and the
  /// key path to the value at fault. Stricter than llvm::json where
  /// simdjson is: an integer literal must fit in int64_t or uint64_t, a
  /// number in a double, and a \u escape of a surrogate must be one half of
  /// a pair. `maxDepth` must be at least 1.
  static llvm::Expected<JSONDocument> parse(llvm::StringRef text,
                                            llvm::StringRef fileNameForErrors,
                                            unsigned maxDepth = kMaxJSONDepth);

  JSONDocument(JSONDocument &&);
  JSONDocument &operator=(JSONDocument &&);
  ~JSONDocument();

  JSONValue root() const { return JSONValue(tape.get(), 0); }

private:
  explicit JSONDocument(std::unique_ptr<detail::JSONTape> tape);
  std::unique_ptr<detail::JSONTape> tape;
};

/// Parses JSON `text` read from `fileNameForErrors` with JSONDocument (so
/// arrays and objects nest at most `maxDepth` deep and errors carry the
/// file, line, column and key path) and copies it into an llvm::json::Value,
/// for readers that walk llvm::json (checkpoint manifests). Profiles and
/// calibrations are read from the JSONDocument directly.
llvm::Expected<llvm::json::Value> parseJSON(llvm::StringRef text,
                                            llvm::StringRef fileNameForErrors,
                                            unsigned maxDepth = kMaxJSONDepth);

/// The text of `value` as every JSON parser reads it: llvm::json prints a
/// non-finite number as the bare word `nan`, `inf` or `-inf`, which is not
/// JSON, so each is written as the string "NaN", "Infinity" or "-Infinity"
/// (the words Python's float() and JavaScript's Number() take). `indent` 0
/// writes one line. Every JSON file oasr writes goes through this.
std::string formatJSON(llvm::json::Value value, unsigned indent = 0);

/// The string formatJSON writes for the non-finite number `x`.
llvm::StringRef nonFiniteJSONName(double x);

} // namespace oasr

#endif // OASR_SUPPORT_JSON_H
