#===- bench/data.cmake - Data sources' throughput -------------------------===#
# bench/data/run_data.py runs it next to PyTorch's DataLoader.
add_executable(oasr-bench-data ${CMAKE_CURRENT_SOURCE_DIR}/data/DataBench.cpp)
target_link_libraries(oasr-bench-data PRIVATE OASRData)
set_target_properties(oasr-bench-data PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
