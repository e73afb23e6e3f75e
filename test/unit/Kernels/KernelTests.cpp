#include "oasr/Runtime/Kernel.h"
#include <gtest/gtest.h>
TEST(Kernels, Smoke) { EXPECT_TRUE(oasr::rt::createCpuBackend() != nullptr); }
