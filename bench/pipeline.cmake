#===- bench/pipeline.cmake - Training-pipeline compile time ---------------===#
# `ninja bench-pipeline` times --oasr-train-pipeline on the real models
# (bench/run_pipeline.sh; results in bench/results/pipeline.{json,txt}).
if(TARGET oasr-opt AND TARGET oasr-translate)
  add_custom_target(bench-pipeline
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/run_pipeline.sh ${CMAKE_BINARY_DIR}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DEPENDS oasr-opt oasr-translate
    USES_TERMINAL
    COMMENT "Timing --oasr-train-pipeline on real models")
endif()
