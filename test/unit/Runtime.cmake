#===- test/unit/Runtime.cmake - executor, data loaders, comm engine -------===#
oasr_add_unittest(OASRRuntimeTests Runtime/RuntimeTests.cpp Runtime/ArenaPlanTest.cpp
  Runtime/SetupTests.cpp Runtime/GradWireTest.cpp Runtime/RunTests.cpp
  Runtime/LossScaleTest.cpp Runtime/StepGraphsTest.cpp Runtime/PowerSgdTest.cpp
  Runtime/ProgramTest.cpp Runtime/StatusTest.cpp Runtime/StagedAllreduceTest.cpp
  Runtime/MetricsPlotTest.cpp
  LIBS OASRRunDriver OASRLowerRun OASRLower OASRRuntime OASRDialect MLIR)
# StepGraphs is private to the runtime.
target_include_directories(OASRRuntimeTests PRIVATE
  ${PROJECT_SOURCE_DIR}/runtime)
