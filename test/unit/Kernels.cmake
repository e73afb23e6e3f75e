#===- test/unit/Kernels.cmake - kernel tests against PyTorch --------------===#
# The forward and backward kernels of the cpu backend, and of the cuda backend
# in a CUDA build (on a visible GPU), compared with PyTorch:
# scripts/kernel_reference.py writes inputs and torch's results into a temp
# directory at test time (nothing generated is committed).
set(_oasr_kernel_test_libs OASRKernels)
if(TARGET OASRKernelsCuda)
  list(APPEND _oasr_kernel_test_libs OASRKernelsCuda)
endif()
oasr_add_unittest(OASRKernelTests Kernels/KernelTests.cpp
  LIBS ${_oasr_kernel_test_libs})
target_compile_definitions(OASRKernelTests PRIVATE
  OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# The convolution cases once more with each layout policy forced (the default
# "auto" mixes them by shape).
foreach(layout plain blocked)
  add_test(NAME OASRKernelTests.Conv.${layout}
    COMMAND OASRKernelTests --gtest_filter=Backends/KernelsVsTorch.Conv/cpu)
  set_tests_properties(OASRKernelTests.Conv.${layout} PROPERTIES
    ENVIRONMENT OASR_CPU_CONV_LAYOUT=${layout})
endforeach()
