#!/usr/bin/python3
"""Synthetic grade-school arithmetic word problems in GSM8K's format, and the English text corpus.

  /usr/bin/python3 tools/arith_data.py --heldout tests/data/arith/heldout.jsonl   # regenerate
  /usr/bin/python3 tools/arith_data.py --sample 5                                  # show some

A problem is {"question": str, "answer": str} like GSM8K's jsonl: the answer is one worked step
per operation, column by column (worked_step), and then the final line "#### N", e.g.

  Tom has 23 apples. He buys 45 more and gives away 12. How many apples does he have now?
  23 + 45 - 12: 3 + 5 = 8, 2 + 4 = 6, so 23 + 45 - 12 = 68 - 12.
  68 - 12: 8 - 2 = 6, 6 - 1 = 5, so 68 - 12 = 56.
  #### 56

Problems have 2 or 3 steps (+ and -), every number in the question is 1..100, every intermediate
and final result is 0..200. `key` (template id + numbers) identifies a problem independently of
names and objects; the training stream (`Problems`) skips every key of the held-out set, so the
500 held-out problems are never seen in training, not even with other names.

English text: the licence texts that Debian's `base-files` package ships in
/usr/share/common-licenses/ (the same corpus family the test tokenizer is trained on).
HELDOUT_LICENCES are kept out of training and used for held-out text metrics.
"""

import argparse
import json
import os
import random

NAMES = ["Tom", "Anna", "Ben", "Mia", "Sam", "Lily", "Max", "Emma", "Leo", "Zoe", "Jack", "Ella",
         "Noah", "Ava", "Omar", "Nina", "Ravi", "Sara", "Ivan", "Lucy"]
HE = {"Tom": "He", "Ben": "He", "Sam": "He", "Max": "He", "Leo": "He", "Jack": "He",
      "Noah": "He", "Omar": "He", "Ravi": "He", "Ivan": "He"}
ITEMS = ["apples", "pencils", "stickers", "marbles", "cookies", "books", "coins", "stamps",
         "shells", "cards", "eggs", "flowers", "balloons", "candies", "toys", "rocks"]

# (template id, question format, steps). Steps are (op, operand) applied left to right to the
# first number; q holds the numbers n0, n1, ... in question order.
TEMPLATES = [
    ("buy_give", "{A} has {n0} {X}. {P} buys {n1} more and gives away {n2}. "
                 "How many {X} does {p} have now?", "+-"),
    ("lose_find", "{A} had {n0} {X}. {P} lost {n1} of them, then found {n2} more. "
                  "How many {X} does {p} have now?", "-+"),
    ("box_add", "A box holds {n0} {X}. {A} adds {n1} {X} and then {n2} more. "
                "How many {X} are in the box?", "++"),
    ("eat_eat", "There are {n0} {X} in a basket. {A} takes {n1} and {B} takes {n2}. "
                "How many {X} are left in the basket?", "--"),
    ("two_kids", "{A} has {n0} {X} and {B} has {n1} {X}. They give {n2} of them to a friend. "
                 "How many {X} do they have left?", "+-"),
    ("shop", "A shop had {n0} {X}. It sold {n1} in the morning and got {n2} more in the "
             "afternoon. How many {X} does the shop have now?", "-+"),
    ("three_step", "{A} had {n0} {X}. {P} bought {n1} more, gave {n2} to {B}, and then got "
                   "{n3} from {C}. How many {X} does {p} have now?", "+-+"),
    ("three_lose", "{A} collected {n0} {X}. {P} gave {n1} to {B} and {n2} to {C}, then "
                   "found {n3} more. How many {X} does {p} have now?", "--+"),
    ("three_add", "{A} has {n0} {X}. {B} gives {p2} {n1} more, {C} gives {p2} {n2}, and "
                  "{p} loses {n3}. How many {X} does {p} have now?", "++-"),
]


def _numbers(rng, ops):
    """First number and operands, all 1..100, with every partial result in 0..200."""
    while True:
        v = rng.randint(1, 100)
        ns, vals = [v], []
        ok = True
        for op in ops:
            b = rng.randint(1, 100)
            v = v + b if op == "+" else v - b
            if not 0 <= v <= 200:
                ok = False
                break
            ns.append(b)
            vals.append(v)
        if ok:
            return ns, vals


def worked_step(a, op, b, rest=""):
    """One operation worked column by column, ones digit first, e.g.

      59 + 61: 9 + 1 = 10, 5 + 6 + 1 = 12, so 59 + 61 = 120.
      61 - 59: 11 - 9 = 2, 6 - 5 - 1 = 0, so 61 - 59 = 2.

    An addition column adds the carry ("+ 1") when the previous column reached 10; the last
    column's sum is written whole. A subtraction column that must borrow writes its top digit
    plus ten ("11 - 9") and the next column subtracts the borrow ("- 1"). A missing digit is 0.
    Each column is one single-digit fact, so a model of a few million parameters can learn it.
    `rest` (the chain format) is the rest of the expression: the head and the conclusion carry
    it ("59 - 54 + 61: ..., so 59 - 54 + 61 = 5 + 61."), so that the next operand is copied from
    a few tokens back and the next head from the end of the line above, instead of being looked
    up in the question.
    """
    da, db = [int(c) for c in reversed(str(a))], [int(c) for c in reversed(str(b))]
    width = max(len(da), len(db))
    da += [0] * (width - len(da))
    db += [0] * (width - len(db))
    cols, digits, carry = [], [], 0
    for x, y in zip(da, db):
        if op == "+":
            s = x + y + carry
            cols.append(f"{x} + {y}" + (" + 1" if carry else "") + f" = {s}")
            digits.append(s % 10)
            carry = s // 10
        else:
            top = x + 10 if x - y - carry < 0 else x
            r = top - y - carry
            cols.append(f"{top} - {y}" + (" - 1" if carry else "") + f" = {r}")
            digits.append(r)
            carry = 1 if top != x else 0
    value = a + b if op == "+" else a - b
    assert carry == 0 or op == "+", (a, op, b)
    assert int("".join(map(str, reversed(digits)))) + (carry * 10 ** width) == value, (a, op, b)
    return (f"{a} {op} {b}{rest}: " + ", ".join(cols) +
            f", so {a} {op} {b}{rest} = {value}{rest}.")


def make_problem(rng, chain=True):
    tid, fmt, ops = TEMPLATES[rng.randrange(len(TEMPLATES))]
    ns, vals = _numbers(rng, ops)
    a, b, c = rng.sample(NAMES, 3)
    pron = HE.get(a, "She")
    q = fmt.format(A=a, B=b, C=c, P=pron, p=pron.lower(), p2="him" if pron == "He" else "her",
                   X=rng.choice(ITEMS), **{f"n{i}": n for i, n in enumerate(ns)})
    steps, cur = [], ns[0]
    for i, (op, n, v) in enumerate(zip(ops, ns[1:], vals)):
        rest = "".join(f" {o} {m}" for o, m in zip(ops[i + 1:], ns[i + 2:])) if chain else ""
        steps.append(worked_step(cur, op, n, rest))
        cur = v
    answer = "\n".join(steps) + f"\n#### {vals[-1]}"
    key = tid + ":" + ",".join(map(str, ns))
    return {"question": q, "answer": answer, "key": key}


def final_answer(text):
    """The number after the last '####' (GSM8K convention), or None."""
    if "####" not in text:
        return None
    tail = text.rsplit("####", 1)[1].strip().split()
    return tail[0].rstrip(".").replace(",", "") if tail else None


HELDOUT_SEED = 20240601
N_HELDOUT = 500


def heldout_problems():
    rng = random.Random(HELDOUT_SEED)
    out, keys = [], set()
    while len(out) < N_HELDOUT:
        p = make_problem(rng)
        if p["key"] not in keys:
            keys.add(p["key"])
            out.append(p)
    return out


class Problems:
    """Endless training stream that never yields a held-out problem key."""

    def __init__(self, seed, exclude_keys, chain=True):
        self.rng = random.Random(seed)
        self.exclude = set(exclude_keys)
        self.chain = chain

    def next(self):
        while True:
            p = make_problem(self.rng, self.chain)
            if p["key"] not in self.exclude:
                return p


LICENCE_DIR = "/usr/share/common-licenses"
TRAIN_LICENCES = ["GPL-3", "GPL-2", "LGPL-2.1", "LGPL-3", "Apache-2.0", "MPL-2.0", "MPL-1.1",
                  "GFDL-1.3", "GFDL-1.2", "GPL-1", "LGPL-2", "CC0-1.0", "BSD"]
HELDOUT_LICENCES = ["Artistic"]


def read_licences(names):
    texts = []
    for n in names:
        with open(os.path.join(LICENCE_DIR, n), encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", help="write the held-out set (GSM8K jsonl + key) here")
    ap.add_argument("--sample", type=int, default=0)
    a = ap.parse_args()
    if a.heldout:
        os.makedirs(os.path.dirname(a.heldout) or ".", exist_ok=True)
        with open(a.heldout, "w") as f:
            for p in heldout_problems():
                f.write(json.dumps(p) + "\n")
        print(f"wrote {N_HELDOUT} problems to {a.heldout}")
    rng = random.Random(1)
    for _ in range(a.sample):
        p = make_problem(rng)
        print(p["question"] + "\n" + p["answer"] + "\n")


if __name__ == "__main__":
    main()
