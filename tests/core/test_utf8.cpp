// tests/core/test_utf8.cpp: text for one line of a log or a message (utf8::printable): control characters and bytes
// that are not UTF-8 escaped, well-formed text kept, long text cut with its length.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

namespace rn50::utf8 {
namespace {

TEST(Printable, EscapesWhatCouldEndOrForgeALine) {
  EXPECT_EQ(printable("train/cat/1.JPEG"), "train/cat/1.JPEG");
  EXPECT_EQ(printable("new\nline\r\tx"), "new\\nline\\r\\tx");
  EXPECT_EQ(printable(std::string("a\0b\x1b[31m\x7f", 9)), "a\\x00b\\x1b[31m\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // é and € stay
  EXPECT_EQ(printable("\x80\xff-\xc3"), "\\x80\\xff-\\xc3");                     // not UTF-8, or cut short
}

TEST(Printable, CutsLongTextAndSaysHowLongItWas) {
  EXPECT_EQ(printable(std::string(10, 'x'), 10), std::string(10, 'x'));
  EXPECT_EQ(printable(std::string(11, 'x'), 10), std::string(10, 'x') + "... (11 bytes)");
  EXPECT_EQ(printable(std::string(11, '\n'), 2), "\\n\\n... (11 bytes)");
}

}  // namespace
}  // namespace rn50::utf8
