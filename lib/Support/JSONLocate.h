//===- JSONLocate.h - Where a JSON text goes wrong, and where values are -===//
//
// simdjson says only that a text is invalid (an error code); the scanner
// behind these two functions reads the text again, by the grammar of RFC
// 8259 and simdjson's number and string rules, to say what is wrong, where,
// and on which key path. It also finds the byte offset of the k-th value in
// document order, the order of JSONDocument's tape.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SUPPORT_JSONLOCATE_H
#define OASR_SUPPORT_JSONLOCATE_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace oasr {
namespace detail {

/// The first syntax error of a JSON text: what, at which byte, and the key
/// path to the value at fault ("layers[3].grads[0]"; empty at the top).
struct JSONSyntaxError {
  std::string message;
  size_t offset = 0;
  std::string path;
};

/// The first error of `text` with arrays and objects nested at most
/// `maxDepth` deep, or std::nullopt when the scanner finds none.
std::optional<JSONSyntaxError> findJSONSyntaxError(llvm::StringRef text,
                                                   unsigned maxDepth);

/// Byte offset of value number `ordinal` in document order (object keys
/// count as values, each before its value) of a text simdjson accepted
/// with `maxDepth`; the offset where the scan stopped if it has no such
/// value.
size_t findJSONValueOffset(llvm::StringRef text, uint32_t ordinal,
                           unsigned maxDepth);

} // namespace detail
} // namespace oasr

#endif // OASR_SUPPORT_JSONLOCATE_H
