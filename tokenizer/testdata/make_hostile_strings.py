#!/usr/bin/env python3
"""Writes hostile_strings.json: strings that stress tokenizers (whitespace, line ends, NBSP,
combining marks, emoji sequences, CJK, digit runs, special-token look-alikes, mixed scripts).
Deterministic; rerun after editing. Run from this directory."""
import itertools, json

S = []
add = S.append

# Empty and whitespace runs.
for s in ["", " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\v", "\f", " \n", "\n ",
          " \t ", "\t\t\t", " " * 17, "\n" * 9, " \n \n ", "a\r\nb", "a\rb", "a\n\rb", "line1\r\nline2\r\n",
          "x \r\n y", "  \r\n\t x", "end   ", "   start", " mid  dle ", "a\u2028b", "a\u2029b", "a\u0085b"]:
    add(s)
# Other spaces: NBSP, ideographic, thin, zero-width (not a space), BOM.
for sp in ["\u00a0", "\u3000", "\u2009", "\u200b", "\u202f", "\u205f", "\u1680", "\ufeff", "\u2000", "\u200a"]:
    for tmpl in ["{0}", "a{0}b", "{0}{0}x", "x{0}", " {0} ", "1{0}000", "{0}\n"]:
        add(tmpl.format(sp))
# Combining marks and normalization forms.
for s in ["cafe\u0301", "caf\u00e9", "e\u0301\u0301\u0301", "\u0301", " \u0301", "a\u0308\u0304",
          "n\u0303o", "A\u030a", "\u212b", "\u1e9b\u0323", "ﬁ", "Ⅸ", "①②③", "x\u0338", "ä" * 5, "a\u0300b\u0301c\u0302",
          "Z\u0351\u0352\u0353algo", "\u0915\u094d\u0937", "ก\u0e31\u0e49", "\u05e9\u05c1\u05b8"]:
    add(s)
# Emoji: modifiers, ZWJ sequences, flags, keycaps, variation selectors.
for s in ["👍", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇫🇷🇩🇪", "🇺", "1️⃣", "#️⃣", "❤️", "❤\ufe0e",
          "😶‍🌫️", "🦙🦙🦙", "🧑‍🤝‍🧑", "a👍b", " 👍 ", "👍\n", "🚀🚀🚀🚀🚀🚀🚀🚀", "☃", "\U0001F600\U0001F601"]:
    add(s)
# CJK, Korean, Japanese, mixed.
for s in ["我想在apple工作", "中文", "你好，世界！", "日本語のテキスト", "カタカナ", "ｶﾀｶﾅ", "한국어 텍스트", "漢字かな交じり文",
          "１２３４５", "ＡＢＣ", "〇一二三", "　全角スペース　", "中a文1字", "「引用」", "…。、"]:
    add(s)
# Digit runs and numbers.
for n in range(1, 13):
    add("7" * n)
for s in ["3.14159", "1,000,000", "1e-10", "0x1F", "-42", "+1 (555) 123-4567", "2024-01-01T00:00:00Z",
          "١٢٣", "٣.١٤", "१२३४", "½", "¾ cup", "x²", "10^9", "v1.2.3", "1st 2nd 3rd", "a1b22c333d4444",
          " 123", "  123", "\n123", "123abc", "abc123", "12 34  56   78"]:
    add(s)
# Contractions and apostrophes.
for s in ["I'm", "I'M", "you're", "YOU'RE", "we've", "she'll", "he'd", "it's", "IT'S", "'s", "'", "''",
          "y'all", "don't", "DON'T", "rock'n'roll", "'hello'", "l'ſ", "'ſ", "’s", "it’s", "'Ll", "'lL x",
          "O'Neil's", "'re'", " 's"]:
    add(s)
# Special-token look-alikes.
for s in ["<s>", "</s>", "<unk>", "<s >", "< s>", "<|endoftext|>", "<|endoftext|", "|endoftext|>",
          "<|im_start|>", "<|im_end|>", "<|im_start|>user\nhi<|im_end|>", "<|im_start|><|im_end|>",
          "<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>system<|end_header_id|>\n\n",
          "<|eot_id|><|eot_id|>", "<|eot_id|", "<<|eot_id|>>", "x<|eot_id|>y", " <|eot_id|> ",
          "<0x41>", "<0x0A>", "<0xZZ>", "▁", "▁▁x", "Ġ", "Ċ", "<|reserved_special_token_0|>",
          "<think>", "</think>", "<tool_call>", "<|fim_prefix|>", "<|vision_start|>", "[INST]", "[/INST]",
          "<s>[INST] hi [/INST]", "<|user|>", "<|end|>", "<end_of_turn>", "<|im_start|>assistant\n",
          "text</s>more", "<s><s>", "<unk><unk>x"]:
    add(s)
# Mixed scripts, RTL, control characters, punctuation runs.
for s in ["Hello мир 世界 🌍", "שלום עולם", "مرحبا بالعالم", "abc\u202edef", "a\u200db", "a\u200cb",
          "\x00", "a\x00b", "\x1b[31mred\x1b[0m", "\x7f", "\u0007bell", "!!!???...", "------=======",
          "'''```\"\"\"", "...!!!???", "<<<>>>", "{{}}[[]]", "$$$ +++ ===", "~^|`", "a—b–c", "«quotes»",
          "Ελληνικά", "Ελληνικά ΚΕΦΑΛΑΊΑ", "İstanbul", "straße", "ǅemal", "ﬀ", "ÅÄÖ åäö", "Cửa Việt",
          "ខ្មែរ", "ພາສາລາວ", "ᚠᛇᚻ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟙𝟚𝟛", "\U00010000", "\U0010fffd", "\ue000",
          "tab\tseparated\tvalues", "trailing space ", "  leading", "MiXeD CaSe", "snake_case_name",
          "camelCaseName", "kebab-case-name", "path/to/file.go", "https://example.com/a?b=c&d=e#f",
          "user@example.com", "C:\\Windows\\System32", "if (x) { return y; }", "def f(x):\n    return x\n",
          "    indented\n\tcode", "<div class=\"a\">b</div>", "SELECT * FROM t WHERE a = 'b';",
          "$ echo $HOME", "#include <stdio.h>", "a.b.c.d", "...", "…", "•", "¶§", "©®™", "€£¥₹"]:
    add(s)
# Combinations that cross pre-tokenizer rules.
atoms = [" ", "\n", "\r\n", "\u00a0", "a", "Z", "7", "'s", "!", "é", "👍", "中", "\t"]
for a, b, c in itertools.islice(itertools.product(atoms, repeat=3), 0, None, 17):
    add(a + b + c)
# Long strings.
add("a" * 300)
add(" " * 100 + "x")
add("9" * 100)
add("ab " * 50)
add("🦙" * 40)
add("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 4)

seen, out = set(), []
for s in S:
    if s not in seen:
        seen.add(s)
        out.append(s)
json.dump(out, open("hostile_strings.json", "w"), ensure_ascii=True, indent=0)
print(len(out), "strings")
