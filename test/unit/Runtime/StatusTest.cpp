//===- StatusTest.cpp - The kernel layer's Status and StatusOr ------------===//

#include "oasr/Runtime/Status.h"

#include "gtest/gtest.h"

#include <memory>
#include <string>

using namespace oasr::rt;

namespace {

struct Base {
  virtual ~Base() = default;
  virtual int value() const { return 1; }
};
struct Derived : Base {
  int value() const override { return 2; }
};

StatusOr<std::unique_ptr<Base>> make(bool fail) {
  if (fail)
    return Status::error("node 'n' (Op): no kernel");
  return std::make_unique<Derived>();
}

Status twoSteps(bool firstFails, bool secondFails, int &reached) {
  reached = 0;
  OASR_RETURN_IF_ERROR(firstFails ? Status::error("first") : Status());
  reached = 1;
  OASR_RETURN_IF_ERROR(secondFails ? Status::error("second") : Status());
  reached = 2;
  return Status::success();
}

TEST(Status, OkAndErrorCarryTheirMessage) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
  Status bad = Status::error("node 'x' (Conv): kernel shape");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "node 'x' (Conv): kernel shape");
  Status copy = bad; // shares the message
  EXPECT_FALSE(copy.ok());
  EXPECT_EQ(copy.message(), bad.message());
}

TEST(Status, StatusOrHoldsAValueOrTheFailure) {
  StatusOr<std::unique_ptr<Base>> good = make(false);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)->value(), 2);
  std::unique_ptr<Base> taken = *std::move(good);
  EXPECT_EQ(taken->value(), 2);
  StatusOr<std::unique_ptr<Base>> bad = make(true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "node 'n' (Op): no kernel");
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
  int reached = -1;
  EXPECT_TRUE(twoSteps(false, false, reached).ok());
  EXPECT_EQ(reached, 2);
  Status s = twoSteps(true, false, reached);
  EXPECT_EQ(s.message(), "first");
  EXPECT_EQ(reached, 0);
  s = twoSteps(false, true, reached);
  EXPECT_EQ(s.message(), "second");
  EXPECT_EQ(reached, 1);
}

} // namespace
