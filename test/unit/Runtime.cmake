#===- test/unit/Runtime.cmake - executor, data loaders, comm engine -------===#
oasr_add_unittest(OASRRuntimeTests Runtime/RuntimeTests.cpp
  LIBS OASRRuntime OASRDialect MLIR)
