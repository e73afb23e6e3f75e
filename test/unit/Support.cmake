#===- test/unit/Support.cmake - shared utilities' units -------------------===#
oasr_add_unittest(OASRSupportTests
  Support/JSONTest.cpp
  LIBS OASRSupport
)
