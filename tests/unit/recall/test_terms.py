"""The recall tokenizer: Latin words and Chinese character bigrams, one set of rules for every language."""

from __future__ import annotations

from partner_repo.recall._terms import STOPWORDS, term_counts, terms


def test_latin_words_are_lower_cased_in_order() -> None:
    assert terms("Partner stores MEMORY slices") == ["partner", "store", "memori", "slice"]


def test_english_stopwords_are_left_out() -> None:
    assert terms("What is the name of the project?") == ["name", "project"]
    assert "the" in STOPWORDS


def test_a_possessive_is_dropped_and_other_apostrophes_removed() -> None:
    assert terms("Partner's plan, don't forget it") == ["partner", "plan", "dont", "forget"]


def test_a_typographic_apostrophe_reads_as_an_ascii_one() -> None:
    assert terms("Caroline\u2019s dog") == terms("Caroline's dog") == ["carolin", "dog"]


def test_inflected_forms_share_one_english_stem() -> None:
    assert terms("painting painted paints") == ["paint", "paint", "paint"]
    assert terms("memories memory") == ["memori", "memori"]
    assert terms("classes class") == ["class", "class"]


def test_words_that_only_look_plural_keep_their_stem() -> None:
    assert terms("status bus") == ["status", "bus"]


def test_digits_are_words_and_punctuation_separates_them() -> None:
    assert terms("2026-11-30, v2_beta") == ["2026", "11", "30", "v2", "beta"]


def test_text_is_nfkc_normalized_so_full_width_latin_matches_ascii() -> None:
    assert terms("\uff30\uff41\uff52\uff54\uff4e\uff45\uff52 \uff11\uff12\uff13") == ["partner", "123"]


def test_non_ascii_latin_letters_stay_in_their_word() -> None:
    assert terms("Café NAÏVE") == ["café", "naïve"]


def test_a_chinese_run_becomes_overlapping_bigrams() -> None:
    assert terms("项目管理") == ["项目", "目管", "管理"]


def test_a_lone_chinese_character_is_kept_as_a_unigram() -> None:
    assert terms("猫") == ["猫"]
    assert terms("猫 and 狗") == ["猫", "狗"]


def test_chinese_punctuation_ends_a_run() -> None:
    assert terms("北京\uff0c上海\u3002广州") == ["北京", "上海", "广州"]


def test_mixed_chinese_and_latin_text_splits_at_the_script_boundary() -> None:
    assert terms("我在Partner项目里做memory") == ["我在", "partner", "项目", "目里", "里做", "memori"]


def test_japanese_kana_and_korean_hangul_are_bigrammed_too() -> None:
    assert terms("メモリ") == ["メモ", "モリ"]
    assert terms("기억") == ["기억"]


def test_empty_text_has_no_terms() -> None:
    assert terms("") == []
    assert term_counts("") == {}


def test_punctuation_only_has_no_terms() -> None:
    assert terms("?!... -- \u3002\uff0c\u3001 ()") == []


def test_term_counts_counts_repeats_in_first_occurrence_order() -> None:
    counts = term_counts("记忆 记忆系统 Memory memory")
    assert counts == {"记忆": 2, "忆系": 1, "系统": 1, "memori": 2}
    assert list(counts) == ["记忆", "忆系", "系统", "memori"]
