#===- bench/import.cmake - ONNX import benchmark --------------------------===#
# `ninja bench-import`: exports the real models (once, into the build tree),
# times `oasr-translate --import-onnx` (import + verify) and its peak RSS, and
# writes bench/results/import.{md,json} in the source tree.
if(TARGET oasr-translate)
  add_custom_target(bench-import
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/run_import.sh
            $<TARGET_FILE:oasr-translate> ${CMAKE_BINARY_DIR}/bench/import-models
            ${OASR_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/results/import
    DEPENDS oasr-translate
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    USES_TERMINAL)
endif()
