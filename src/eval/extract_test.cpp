// Answer extraction on the outputs models really produce: worked answers, trailing chatter,
// currency, thousands separators, lists, signs, decimals and several "####" markers.
#include "eval/extract.h"

#include <gtest/gtest.h>

namespace mx::eval {
namespace {

std::string Num(std::string_view text) { return NormalizeNumber(ExtractNumber(text)); }

TEST(ExtractNumber, MarkerWinsOverLaterNumbers) {
  EXPECT_EQ(Num("48/2 = 24. 48 + 24 = 72.\n#### 72"), "72");
  EXPECT_EQ(Num("#### 18\nQuestion: Tom has 5 apples"), "18");
  // The first marker followed by a number counts; later answers of hallucinated questions don't.
  EXPECT_EQ(Num("so 3 + 4 = 7\n#### 7\n#### 9"), "7");
  // A marker with no number after it falls back to the last number of the whole text.
  EXPECT_EQ(Num("She has 12 pens, then 15.\n####"), "15");
  EXPECT_EQ(Num("####5"), "5");
}

TEST(ExtractNumber, LastNumberWithoutMarker) {
  EXPECT_EQ(Num("The answer is 42."), "42");
  EXPECT_EQ(Num("She pays $1,250.50 in total"), "1250.5");
  EXPECT_EQ(Num("No idea."), "");
  EXPECT_EQ(Num(""), "");
}

TEST(ExtractNumber, CurrencyCommasAndSigns) {
  EXPECT_EQ(Num("#### $1,000"), "1000");
  EXPECT_EQ(Num("#### 1,000,000 dollars"), "1000000");
  EXPECT_EQ(Num("#### -5"), "-5");
  EXPECT_EQ(Num("#### \xE2\x88\x92"
                "7"),
            "-7");  // U+2212 minus
  EXPECT_EQ(Num("#### -$20"), "-20");
  // "5-3": the dash is a minus between numbers, so the last number is 3, not -3.
  EXPECT_EQ(Num("5-3"), "3");
  // A comma not followed by exactly three digits separates numbers.
  EXPECT_EQ(Num("the sides are 3,4"), "4");
  EXPECT_EQ(Num("values 1,2345"), "2345");
  EXPECT_EQ(ExtractNumber("list: 10, 20, 30."), "30");
}

TEST(ExtractNumber, DecimalsAndFullStops) {
  EXPECT_EQ(ExtractNumber("It costs 5."), "5");
  EXPECT_EQ(ExtractNumber("It costs 5.25."), "5.25");
  EXPECT_EQ(Num("#### 18.00"), "18");
  EXPECT_EQ(Num("#### 0.50"), "0.5");
  EXPECT_EQ(Num("#### 007"), "7");
}

TEST(NormalizeNumber, CanonicalForms) {
  EXPECT_EQ(NormalizeNumber("$1,000.00"), "1000");
  EXPECT_EQ(NormalizeNumber("-0"), "0");
  EXPECT_EQ(NormalizeNumber("-0.0"), "0");
  EXPECT_EQ(NormalizeNumber(".5"), "0.5");
  EXPECT_EQ(NormalizeNumber("12"), "12");
  EXPECT_EQ(NormalizeNumber("1e5"), "");
  EXPECT_EQ(NormalizeNumber(""), "");
  EXPECT_EQ(NormalizeNumber("$"), "");
  EXPECT_NE(NormalizeNumber("72"), NormalizeNumber("7.2"));
}

TEST(ExtractLetter, AnswerPhrases) {
  EXPECT_EQ(ExtractLetter("Reasoning... so\nAnswer: C", 4), 'C');
  EXPECT_EQ(ExtractLetter("The answer is (B).", 4), 'B');
  EXPECT_EQ(ExtractLetter("the answer is D", 4), 'D');
  EXPECT_EQ(ExtractLetter("**Answer:** A", 4), 'A');
  EXPECT_EQ(ExtractLetter("Answer: $B", 4), 'B');
  // The last phrase wins (a model that revises itself).
  EXPECT_EQ(ExtractLetter("Answer: A\nWait, no.\nAnswer: D", 4), 'D');
}

TEST(ExtractLetter, BareLettersAndParentheses) {
  EXPECT_EQ(ExtractLetter("B", 4), 'B');
  EXPECT_EQ(ExtractLetter("  (C)", 4), 'C');
  EXPECT_EQ(ExtractLetter("D. because ...", 4), 'D');
  EXPECT_EQ(ExtractLetter("I think (A) is wrong and (C) is right", 4), 'C');
  // An article is not an answer, nor is a letter beyond the choices or inside a word.
  EXPECT_EQ(ExtractLetter("A shop sells apples", 4), '\0');
  EXPECT_EQ(ExtractLetter("Answer: E", 4), '\0');
  EXPECT_EQ(ExtractLetter("Answer: Because", 4), '\0');
  EXPECT_EQ(ExtractLetter("Answer: E", 5), 'E');
  EXPECT_EQ(ExtractLetter("", 4), '\0');
  EXPECT_EQ(ExtractLetter("no idea", 4), '\0');
}

}  // namespace
}  // namespace mx::eval
