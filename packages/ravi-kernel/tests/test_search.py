"""The tokenizer every searching store shares: ``fold`` and ``terms`` give the same terms for any text."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from ravi.kernel.search import STOPWORDS, _marks, fold, stem, terms


def reference_fold(text: str) -> str:
    """The rule ``fold`` implements, a character at a time: case-fold, decompose, drop each combining mark that
    follows a kept Latin, Greek or Cyrillic character, recompose. A store's terms index was built with it, so
    a faster ``fold`` must agree with it on every text."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = []
    previous = ""
    for char in decomposed:
        if unicodedata.combining(char) and previous < "\u0530":
            continue
        kept.append(char)
        previous = char
    return unicodedata.normalize("NFKC", "".join(kept))


def reference_terms(text: str) -> list[str]:
    """The rule ``terms`` implements: runs of scripts without spaces as overlapping pairs, then the words of the
    rest (letters and digits of any script, joined by ``-`` or ``.``) less the stop words, stemmed."""
    folded = reference_fold(text)
    unspaced = re.compile(
        "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+"
    )
    out: list[str] = []
    for run in unspaced.findall(folded):
        out.extend(run[i : i + 2] for i in range(len(run) - 1)) if len(run) > 1 else out.append(run)
    words = re.findall(r"\w+(?:[-.]\w+)*", unspaced.sub(" ", folded))
    return out + [stem(w) for w in words if w not in STOPWORDS]


# Letters of the scripts searched, combining marks of several blocks, and anything else.
MIXED = st.text(
    st.one_of(
        st.sampled_from("aeiouAEIOU ßİıΣσςЁё-.'\\:"),
        st.characters(min_codepoint=0x300, max_codepoint=0x36F),  # combining diacritical marks
        st.sampled_from("\u0483\u0591\u0901\u093c\u094d\u1dc0\u20d0\u302a\ufe20\U0001d165"),  # marks elsewhere
        st.sampled_from("कखαβγжщ東京ไทย한국ﬁ①"),
        st.characters(),
    ),
    max_size=40,
)


@given(MIXED)
@example("Straße Café ÉCOLE naïve")
@example("\u0301\u0301e")  # marks at the start of the text
@example("क\u0301\u0301")  # a kept mark below U+0530 drops the mark after it
@example("e\u20d0\u0301")  # marks after a dropped mark follow the letter before it
@example("ﬁ ① Ⅻ")  # compatibility characters
def test_fold_agrees_with_the_character_rule(text: str) -> None:
    assert fold(text) == reference_fold(text)


@given(MIXED)
@example("The DEPLOY of db-staging-3 failed")
@example("東京 and Straße")
def test_terms_follow_the_rule(text: str) -> None:
    assert terms(text) == reference_terms(text)


@given(st.text(st.characters(max_codepoint=0x7F)))
def test_terms_of_ascii_text_follow_the_rule(text: str) -> None:
    assert terms(text) == reference_terms(text)


def test_every_combining_character_is_a_mark() -> None:
    """``fold`` scans only the first two planes for combining characters: true of the Unicode Python ships."""
    combining = [chr(c) for c in range(0x110000) if unicodedata.combining(chr(c))]
    assert _marks().fullmatch("".join(combining))


def test_terms_read_every_script() -> None:
    assert terms("Straße CAFÉ db-staging-3 αθήνα Москва 東京都") == [
        "東京", "京都", "strass", "cafe", "db-staging-3", "αθηνα", "москва"
    ]  # fmt: skip


def test_ascii_text_gives_its_words() -> None:
    assert terms("The DEPLOY of db-staging-3 failed: timeout (port 5432).") == [
        "deploi", "db-staging-3", "fail", "timeout", "port", "5432"
    ]  # fmt: skip


def test_inflected_forms_share_a_stem() -> None:
    """Plurals, ``-ed``, ``-ing`` and a final ``-e`` or ``-y`` come off, so a request finds the other forms."""
    groups = [
        ["adopt", "adopted", "adopts", "adopting"],
        ["puppy", "puppies"],
        ["hike", "hiked", "hikes", "hiking"],
        ["practise", "practised", "practising"],
        ["research", "researched", "researching"],
        ["class", "classes"],
        ["run", "runs", "running"],
        ["agree", "agreed"],
    ]
    for group in groups:
        assert len({stem(w) for w in group}) == 1, {w: stem(w) for w in group}
    assert stem("hope") != stem("hop") or stem("hoping") == stem("hope")


def test_identifiers_short_words_and_other_scripts_stay_whole() -> None:
    for word in ["db-staging-3", "inv-2291", "5432", "gas", "bus", "has", "αθηνα", "москва", "strasse3", "Caps"]:
        assert stem(word) == word


def test_a_message_is_searched_by_its_sender_too() -> None:
    from ravi.kernel.messages import ChatMessage
    from ravi.kernel.search import message_text

    assert "Maya" in message_text(ChatMessage.user("I adopted a puppy", name="Maya"))


def test_spread_scores_the_nearest_neighbours_that_are_not_system_messages() -> None:
    """A match's neighbour on each side (system messages skipped) gets ``weight`` times its score unless it
    scores more itself; nothing at or after ``stop`` is scored."""
    from ravi.kernel.messages import ChatMessage
    from ravi.kernel.search import spread

    messages = [
        ChatMessage.user("a"),
        ChatMessage.system("s"),
        ChatMessage.user("b"),
        ChatMessage.user("c"),
        ChatMessage.user("d"),
        ChatMessage.user("e"),
    ]
    assert spread(messages, {2: 4.0}, stop=6, weight=0.5) == {0: 2.0, 2: 4.0, 3: 2.0}
    assert spread(messages, {2: 4.0, 3: 3.0}, stop=6, weight=0.5) == {0: 2.0, 2: 4.0, 3: 3.0, 4: 1.5}
    assert spread(messages, {3: 2.0}, stop=4, weight=0.5) == {2: 1.0, 3: 2.0}
    assert spread(messages, {4: 2.0, 1: 9.0}, stop=4, weight=0.5) == {}
    assert spread(messages, {2: 4.0}, stop=6, weight=0.0) == {2: 4.0}
