// Answer extraction for the accuracy harness: the final number of a GSM8K-style worked answer
// and the chosen letter of a multiple-choice answer. Both are pure functions of the model's
// text, so the rules below are the whole scoring protocol.
//
// Numbers: the first number after the first "####" when one follows it, else the last number
// in the text. A number is an optional sign ('-' or U+2212 not glued to a preceding
// letter or digit), an optional '$', digits with optional thousands commas (a comma counts only
// before exactly three digits, so "3,4" is two numbers), and an optional decimal part (a '.'
// only counts when a digit follows, so a sentence's full stop is not part of it).
// NormalizeNumber drops '$' and commas, trailing decimal zeros, a bare trailing '.', leading
// zeros and the sign of zero, so "$1,000.00" == "1000" and "-0" == "0".
#pragma once

#include <string>
#include <string_view>

namespace mx::eval {

// "" when the text holds no number.
std::string ExtractNumber(std::string_view text);

// The canonical form used for exact match; "" for a string that is not a number.
std::string NormalizeNumber(std::string_view number);

// The letter (an uppercase 'A' + i for i < n_choices) a multiple-choice answer picks, or '\0'.
// In order: the last "Answer: X" / "answer is X" / "answer is (X)" (any case for the word,
// uppercase letter); a reply that is only the letter ("B", "(B)", "B.", "B) text"); the last
// parenthesized "(X)". Letters beyond the choices never match.
char ExtractLetter(std::string_view text, int n_choices);

}  // namespace mx::eval
