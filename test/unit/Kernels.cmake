#===- test/unit/Kernels.cmake - CPU kernel tests against PyTorch ----------===#
# The forward and backward kernels of the cpu backend compared with PyTorch:
# scripts/kernel_reference.py writes inputs and torch's results into a temp
# directory at test time (nothing generated is committed).
oasr_add_unittest(OASRKernelTests Kernels/KernelTests.cpp LIBS OASRKernels)
target_compile_definitions(OASRKernelTests PRIVATE
  OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# The convolution cases once more with each layout policy forced (the default
# "auto" mixes them by shape).
foreach(layout plain blocked)
  add_test(NAME OASRKernelTests.Conv.${layout}
    COMMAND OASRKernelTests --gtest_filter=KernelsVsTorch.Conv)
  set_tests_properties(OASRKernelTests.Conv.${layout} PROPERTIES
    ENVIRONMENT OASR_CPU_CONV_LAYOUT=${layout})
endforeach()
