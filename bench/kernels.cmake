#===- bench/kernels.cmake - CPU kernel speed vs PyTorch -------------------===#
# bench/kernels/run.sh builds and runs it next to bench/kernels/conv_torch.py
# and writes bench/results/kernels.txt.
if(TARGET OASRKernels)
  add_executable(oasr-bench-kernels
    ${CMAKE_CURRENT_SOURCE_DIR}/kernels/KernelBench.cpp)
  target_link_libraries(oasr-bench-kernels PRIVATE OASRKernels)
  set_target_properties(oasr-bench-kernels PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
  # bench/kernels/run_ops.sh: the newer ops against bench/kernels/ops_torch.py.
  add_executable(oasr-bench-ops ${CMAKE_CURRENT_SOURCE_DIR}/kernels/OpsBench.cpp)
  target_link_libraries(oasr-bench-ops PRIVATE OASRKernels)
  set_target_properties(oasr-bench-ops PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
