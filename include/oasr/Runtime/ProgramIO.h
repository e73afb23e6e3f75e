//===- ProgramIO.h - Programs in .oasrprog files ----------------*- C++ -*-===//
//
// A compiled Program (Program.h) as a file: compile once (`oasr-run
// --compile-only=FILE`, `oasr-opt --oasr-emit-program=file=FILE`), then run
// the file with `oasr-run FILE.oasrprog` on every rank, with no MLIR. The
// format is a FlatBuffer (runtime/Program.fbs, file identifier "OASP").
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_PROGRAMIO_H
#define OASR_RUNTIME_PROGRAMIO_H

#include "oasr/Runtime/Program.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace oasr::rt {

/// The format version this build writes and reads.
constexpr unsigned kProgramVersion = 1;

/// The program as the bytes of an .oasrprog file.
std::string serializeProgram(const Program &program);
/// A program from those bytes; errors say what is wrong (not a program, a
/// damaged buffer, another version, an enum out of range), prefixed by
/// `name`.
llvm::Expected<Program> deserializeProgram(llvm::StringRef bytes,
                                           llvm::StringRef name);

/// Writes `program` to `path` (errors name the file).
llvm::Error writeProgram(const Program &program, llvm::StringRef path);
/// Reads an .oasrprog file (errors name the file).
llvm::Expected<Program> readProgram(llvm::StringRef path);

/// True when `path` names an .oasrprog file (by its extension).
bool isProgramFile(llvm::StringRef path);

} // namespace oasr::rt

#endif // OASR_RUNTIME_PROGRAMIO_H
