#===- test/unit/Ops.cmake - The op registry against the kernel backends ---===#
set(_oasr_ops_test_kernels OASRKernels)
if(TARGET OASRKernelsCuda)
  list(APPEND _oasr_ops_test_kernels OASRKernelsCuda)
endif()
oasr_add_unittest(OASROpsTests Ops/OpCoverageTest.cpp
  LIBS OASROps OASRDialect MLIR ${_oasr_ops_test_kernels})
