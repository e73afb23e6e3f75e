#===- test/unit/Runtime.cmake - executor, data loaders, comm engine -------===#
oasr_add_unittest(OASRRuntimeTests Runtime/RuntimeTests.cpp Runtime/ArenaPlanTest.cpp
  Runtime/SetupTests.cpp Runtime/GradWireTest.cpp Runtime/RunTests.cpp
  Runtime/LossScaleTest.cpp
  LIBS OASRRuntime OASRDialect MLIR)
