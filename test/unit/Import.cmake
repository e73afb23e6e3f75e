#===- test/unit/Import.cmake - ModelFile and importONNX units -------------===#
if(TARGET OASRImport)
  oasr_add_unittest(OASRImportTests Import/ModelFileTest.cpp
    LIBS OASRImport OASRDialect MLIR onnx_proto protobuf::libprotobuf)
  target_compile_definitions(OASRImportTests PRIVATE ONNX_ML=1 ONNX_NAMESPACE=onnx)
  oasr_add_unittest(OASRORTCheckpointTests Import/ORTCheckpointTest.cpp
    LIBS OASRImport)
endif()
