#===- bench/planner.cmake - planner speed (Google Benchmark) --------------===#
# bench/run_planner.sh builds and runs it and writes bench/results/planner.*.
if(benchmark_FOUND)
  add_executable(oasr-bench-planner
    ${CMAKE_CURRENT_SOURCE_DIR}/planner/PlannerBench.cpp)
  target_link_libraries(oasr-bench-planner PRIVATE OASRSchedule
    benchmark::benchmark)
  set_target_properties(oasr-bench-planner PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
