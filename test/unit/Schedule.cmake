#===- test/unit/Schedule.cmake - planner library units --------------------===#
oasr_add_unittest(OASRScheduleTests
  Schedule/CompressionTest.cpp
  Schedule/ProfileTest.cpp
  Schedule/SimulatorTest.cpp
  Schedule/StrategyTest.cpp
  Schedule/PropertyTest.cpp
  Schedule/RenderTest.cpp
  Schedule/SteadyTest.cpp
  Schedule/WireDTypeTest.cpp
  LIBS OASRSchedule
)
