"""Long two-person conversations with evidence ids: Ravi's own evaluation set for recall on human conversations.

Generated deterministically from a seed (``python benchmarks/recall/conversations.py`` prints a summary). Each
conversation is two friends talking over months: 19 to 32 sessions a few days to a few weeks apart, each a
dozen to thirty turns. Through them run the facts of each person's life (a new pet, a class, a trip, a job and
a move that later change), stated once in a turn, often in other words than the ones a question uses, with a
relative date ("yesterday", "last weekend") that only the session's date resolves. Around them: the other
person's replies, which repeat the keywords but are not the evidence; the same kind of fact about a friend or a
cousin; and small talk. Each question carries the ids of the turns that hold its evidence:

* ``single``: one fact ("What instrument is Maya learning?" / "I've been practising the cello every night").
* ``temporal``: when a fact happened ("When did Maya adopt her dog?"); the evidence is the turn that says so.
* ``multi``: facts spread over sessions ("What hobbies has Maya taken up?").
* ``update``: the current value of a fact that changed; the evidence is the turn that states the newest value.
* ``dated``: what a person did in a given month ("What did Maya do in March 2023?").
* ``other``: what one person suggested to the other.

How the turns are written varies with the seed, as it does between importers: the speaker's name in the
message's ``name`` or at the start of its text; the session's date in ``created_at`` or not at all; the question
dated after the last session or on the day it is asked. Seeds below 100 are for developing Ravi; seeds from 100
on are held out and only reported (``benchmarks/recall/evidence.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from ravi.kernel.messages import ChatMessage

TRAIN_SEEDS = tuple(range(10))
HELD_OUT_SEEDS = tuple(range(100, 110))

NAMES = (
    "Maya Sam Priya Jonas Aisha Tomas Lena Kofi Mei Diego Ines Ravi Noor Felix Hana Oscar Zara Luca Amara Elias "
    "Sofia Yusuf Clara Mateo Leila Anton Freya Kenji Nadia Pablo Ingrid Omar Tess Bruno Layla Hugo Rosa Theo Asha "
    "Viktor"
).split()
RELATIVES = ("cousin", "coworker", "neighbour", "brother", "sister", "roommate", "best friend", "aunt")
MONTHS = "January February March April May June July August September October November December".split()

# A fact kind: the values it takes, how its owner states it (``{when}``: a relative date), how the other person
# replies (the same keywords, not the evidence), how a third party's version sounds (a distractor), and the
# questions it answers. ``{x}`` is the value's main word, ``{d}`` its detail.
KINDS: dict[str, dict[str, object]] = {
    "pet": {
        "values": [
            ("puppy", "a golden retriever named Biscuit"),
            ("kitten", "a grey tabby we called Pepper"),
            ("parrot", "an African grey named Kiwi"),
            ("rabbit", "a lop-eared bunny called Clover"),
            ("puppy", "a beagle mix named Waffles"),
            ("kitten", "a black kitten named Soot"),
        ],
        "state": [
            "Big news, we brought home {d} {when}! The house is chaos but I'm in love.",
            "So {when} we adopted {d} from the shelter. I haven't slept much since.",
            "Guess who has a new family member? {d}, since {when}. Best decision ever.",
        ],
        "reply": [
            "A {x}! That's adorable, you have to send me pictures.",
            "Oh wow, a {x} is a lot of work but so worth it. How is the training going?",
        ],
        "third": [
            "My {rel} just got a {x} too, it keeps chewing everything in sight.",
            "My {rel} has been looking at {x}s online for weeks, still can't decide.",
        ],
        "ask": {
            "single": [
                "What kind of pet did {P} get?",
                "What animal did {P} bring home?",
                "What is the name of {P}'s new pet?",
            ],
            "temporal": ["When did {P} adopt the new pet?", "When did {P}'s family get their animal?"],
            "overlap": ["What did {P} name the {x}?", "Where did {P} adopt the {x} from?"],
            "overlap_temporal": ["When did {P} bring home the {x}?"],
        },
        "hobby": False,
    },
    "instrument": {
        "values": [
            ("cello", "the cello"),
            ("violin", "the violin"),
            ("ukulele", "the ukulele"),
            ("piano", "the piano"),
            ("saxophone", "the saxophone"),
            ("drums", "the drums"),
        ],
        "state": [
            "I finally started lessons for {d} {when}. My fingers hurt but it's so satisfying.",
            "{when} I bought a secondhand {x} and I've been practising every night since.",
            "Random thing: I signed up with a teacher to learn {d}. First session was {when}.",
        ],
        "reply": [
            "You, playing {d}? I love that. Play me something next time!",
            "The {x} is such a beautiful sound. Are you learning from videos too?",
        ],
        "third": [
            "My {rel} played the {x} in a band years ago, it was loud.",
            "There was a guy playing {d} at the station today, drew a huge crowd.",
        ],
        "ask": {
            "single": ["What musical instrument is {P} learning?", "Which instrument did {P} start playing?"],
            "temporal": ["When did {P} begin learning an instrument?"],
            "overlap": ["How often does {P} practise the {x}?", "Does {P} have a teacher for the {x}?"],
            "overlap_temporal": ["When did {P} start playing the {x}?"],
        },
        "hobby": True,
    },
    "craft": {
        "values": [
            ("pottery", "a pottery class at the community centre"),
            ("watercolour", "a watercolour painting workshop"),
            ("woodworking", "a woodworking course in an old garage"),
            ("knitting", "a knitting circle at the library"),
            ("photography", "an evening photography course"),
            ("calligraphy", "a calligraphy class downtown"),
        ],
        "state": [
            "I joined {d} {when}. My first attempt looked terrible but I'm hooked.",
            "{when} was my first evening at {d}. It's the calmest I've felt in months.",
            "Trying something new for my nerves: {d}. Went for the first time {when}.",
        ],
        "reply": [
            "{x}? That sounds so relaxing, I'd love to see what you make.",
            "I've always wanted to try {x}! Is the teacher any good?",
        ],
        "third": [
            "My {rel} is obsessed with {x} lately, the whole flat is full of it.",
            "Saw an ad for {x} lessons yesterday and thought it looked fun.",
        ],
        "ask": {
            "single": ["What creative hobby did {P} take up?", "What class did {P} sign up for?"],
            "temporal": ["When did {P} go to the first class of the new hobby?"],
            "overlap": ["Where does {P} go for {x}?", "How did {P}'s first {x} attempt turn out?"],
            "overlap_temporal": ["When did {P} start {x}?"],
        },
        "hobby": True,
    },
    "race": {
        "values": [
            ("half marathon", "my first half marathon"),
            ("triathlon", "a sprint triathlon"),
            ("10k", "a charity 10k run"),
            ("cycling", "a hundred kilometre cycling tour"),
            ("swim", "an open water swim across the lake"),
        ],
        "state": [
            "I did it! Finished {d} {when}. My legs are still complaining.",
            "{when} I completed {d}. Slow time, but I crossed the line smiling.",
            "Confession: I secretly trained for months and {when} I finished {d}.",
        ],
        "reply": [
            "A {x}? You're amazing, I can barely run for the bus.",
            "Congratulations on the {x}! Are you signing up for another?",
        ],
        "third": [
            "My {rel} wants to do a {x} next year, I told them they're mad.",
            "The {x} went right past our street this morning, road closed for hours.",
        ],
        "ask": {
            "single": ["What athletic event did {P} complete?", "What race did {P} finish?"],
            "temporal": ["When did {P} complete the endurance event?"],
            "overlap": ["How did {P} feel after the {x}?", "Did {P} finish the {x} with a good time?"],
            "overlap_temporal": ["When did {P} do the {x}?"],
        },
        "hobby": True,
    },
    "trip": {
        "values": [
            ("Lisbon", "Lisbon, the tiles on every building were gorgeous"),
            ("Kyoto", "Kyoto, we saw the temples at sunrise"),
            ("Oaxaca", "Oaxaca, the markets and the mole were unreal"),
            ("Reykjavik", "Reykjavik, we chased the northern lights"),
            ("Marrakesh", "Marrakesh, the spice souks were overwhelming"),
            ("Tbilisi", "Tbilisi, the sulphur baths were a highlight"),
        ],
        "state": [
            "Just got back {when} from {d}.",
            "We flew home {when}. {d}. Still dreaming about it.",
            "Sorry I was quiet, I was travelling: {d}. Landed {when}.",
        ],
        "reply": [
            "{x}! I've always wanted to go there. Was it expensive?",
            "So jealous of the {x} trip. Did you bring anything back?",
        ],
        "third": [
            "My {rel} is going to {x} next month, any tips I could pass on?",
            "I watched a documentary about {x} last night, looked beautiful.",
        ],
        "ask": {
            "single": ["Which city did {P} travel to?", "Where did {P} go on holiday?"],
            "temporal": ["When did {P} return from the trip abroad?"],
            "overlap": ["What did {P} enjoy most in {x}?", "What did {P} see in {x}?"],
            "overlap_temporal": ["When did {P} get back from {x}?"],
        },
        "hobby": False,
    },
    "family": {
        "values": [
            ("wedding", "my sister's wedding by the sea"),
            ("graduation", "my little brother's graduation"),
            ("surgery", "my grandmother's hip surgery, she is recovering well"),
            ("birthday", "my son's seventh birthday party with a dinosaur cake"),
            ("reunion", "a huge family reunion at my uncle's farm"),
        ],
        "state": [
            "{when} was {d}. Emotional day for all of us.",
            "Busy stretch: {d} was {when}, I'm exhausted.",
            "I've been with family a lot, {d} happened {when}.",
        ],
        "reply": [
            "How was the {x}? I hope everyone's doing okay.",
            "A {x} always brings out the drama! Tell me everything.",
        ],
        "third": [
            "My {rel} has a {x} coming up and is already stressed.",
            "We got an invite to a {x} in the autumn, no idea what to wear.",
        ],
        "ask": {
            "single": ["What family event did {P} attend?", "What happened in {P}'s family recently?"],
            "temporal": ["When did {P}'s family event take place?"],
            "overlap": ["Whose {x} did {P} mention?", "How did the {x} in {P}'s family go?"],
            "overlap_temporal": ["When was the {x} {P} talked about?"],
        },
        "hobby": False,
    },
    "volunteer": {
        "values": [
            ("shelter", "the animal shelter, walking the older dogs"),
            ("food bank", "the food bank, packing boxes on Saturdays"),
            ("hospice", "a hospice, reading to patients"),
            ("garden", "the community garden, building raised beds"),
            ("tutoring", "a tutoring program for refugee kids"),
        ],
        "state": [
            "I started volunteering at {d}. First shift was {when}.",
            "{when} I gave my first afternoon to {d}. It put things in perspective.",
            "Something that makes me happy lately: helping out at {d}, since {when}.",
        ],
        "reply": [
            "That's so kind of you. How did you find the {x}?",
            "I keep meaning to volunteer somewhere like a {x}. Is it hard?",
        ],
        "third": [
            "My {rel} volunteers at a {x} too, says it's rewarding.",
            "The {x} near us is closing, they lost their funding.",
        ],
        "ask": {
            "single": ["Where does {P} volunteer?", "What charity work did {P} start?"],
            "temporal": ["When did {P} start helping out as a volunteer?"],
            "overlap": ["What does {P} do when volunteering at the {x}?"],
            "overlap_temporal": ["When was {P}'s first shift volunteering?"],
        },
        "hobby": True,
    },
    "injury": {
        "values": [
            ("ankle", "sprained my ankle on a hike"),
            ("wrist", "broke my wrist falling off my bike"),
            ("back", "hurt my back moving a sofa"),
            ("knee", "twisted my knee at football"),
        ],
        "state": [
            "Ugh, I {d} {when}. Doctor says six weeks of rest.",
            "Small disaster: {when} I {d}. I'm stuck on the couch.",
        ],
        "reply": [
            "Oh no, your {x}! Do you need anything?",
            "Take care of that {x}, don't rush back.",
        ],
        "third": [
            "My {rel} had a bad {x} last year, physio helped a lot.",
            "I woke up with a stiff {x} today, getting old.",
        ],
        "ask": {
            "single": ["What injury did {P} have?", "How did {P} get hurt?"],
            "temporal": ["When did {P} get injured?"],
            "overlap": ["How did {P} hurt the {x}?", "How long does {P} need to rest the {x}?"],
            "overlap_temporal": ["When did {P} hurt the {x}?"],
        },
        "hobby": False,
    },
    "book": {
        "values": [
            ("lighthouse", "a novel about a lighthouse keeper who finds a shipwreck"),
            ("memoir", "a memoir by a surgeon who worked on a ship"),
            ("mountain", "a thriller set on a mountain during a blizzard"),
            ("orchard", "a family saga about an orchard in Normandy"),
            ("robot", "a science fiction story about a robot gardener"),
        ],
        "state": [
            "I'm reading {d}. Started it {when} and can't put it down.",
            "{when} a friend lent me {d}. Finished half already.",
        ],
        "reply": [
            "Ooh, the {x} one sounds good. Would you recommend it?",
            "I love a good {x} story. Lend it to me after?",
        ],
        "third": [
            "My {rel} wrote a short story about a {x} once, never finished it.",
            "There's a film coming out about a {x}, looks cheesy.",
        ],
        "ask": {
            "single": ["What is the book {P} has been reading about?", "What novel did {P} mention reading?"],
            "overlap": ["What is the {x} book {P} is reading about?"],
        },
        "hobby": False,
    },
}

# Facts whose value changes later: the newest statement is the evidence for "now".
UPDATES: dict[str, dict[str, object]] = {
    "job": {
        "values": [
            "a nurse at the children's hospital",
            "a chemistry teacher at a high school",
            "a software developer at a small startup",
            "a chef in an Italian restaurant",
            "a graphic designer for a magazine",
            "an accountant at a logistics firm",
            "a park ranger",
            "a librarian at the university",
        ],
        "first": [
            "Job news: I got hired as {v} {when}. Nervous but excited.",
            "{when} was my first day as {v}. Long day but good people.",
        ],
        "again": [
            "Big change, I quit and started as {v} {when}. Best move I've made.",
            "So I switched jobs again, I work as {v} now, started {when}.",
        ],
        "reply": ["A new job! How are your colleagues?", "Good for you, changing jobs takes guts."],
        "ask": ["What is {P}'s job now?", "Where does {P} work these days?", "What does {P} do for work now?"],
        "ask_first": ["What was {P}'s first job mentioned in the conversation?"],
    },
    "home": {
        "values": ["Denver", "Portland", "Glasgow", "Valencia", "Montreal", "Melbourne", "Porto", "Tallinn"],
        "first": [
            "We signed the lease and moved to {v} {when}. Boxes everywhere.",
            "{when} we finished moving to {v}. Still don't know where anything is.",
        ],
        "again": [
            "Plot twist: we relocated again, to {v} this time, {when}.",
            "We packed up once more and now we live in {v}, since {when}.",
        ],
        "reply": ["How do you like the new place?", "Moving is the worst. Is the neighbourhood nice?"],
        "ask": ["Which city does {P} live in now?", "Where is {P} living currently?"],
        "ask_first": ["Where did {P} move to first?"],
    },
}

SUGGEST = [
    ("sleep", "trouble sleeping", "try a white noise machine and no phone after ten", "white noise"),
    ("stress", "stress at work", "take up yoga on Sunday mornings", "yoga"),
    ("reading", "a book to read", "read The Overstory, it changed how I see trees", "Overstory"),
    ("cooking", "cooking dinner faster", "batch cook a big pot of lentil soup on Sundays", "lentil soup"),
    ("budget", "saving money", "use the envelope method for groceries", "envelope method"),
    ("show", "something to watch", "watch the series about the bakery in Naples", "bakery in Naples"),
    ("podcast", "something for the commute", "listen to the podcast about shipwrecks", "shipwrecks"),
    ("garden", "the dying plants", "water them less and move them to the east window", "east window"),
]

SMALL = [
    "How have you been? It feels like ages.",
    "Work has been hectic, too many meetings and not enough coffee.",
    "The weather finally turned, I wore a jacket for the first time today.",
    "I made pancakes this morning and burned the first three.",
    "Did you watch the game last night? What a finish.",
    "I'm trying to drink more water, it's harder than it sounds.",
    "My phone screen cracked again, I should buy a case.",
    "Traffic was awful, I sat on the bridge for forty minutes.",
    "We had takeaway again, I'm too tired to cook on weekdays.",
    "I keep forgetting to reply to messages, sorry about that.",
    "The neighbours are renovating, drilling starts at eight every day.",
    "I found a great little cafe near the station, the croissants are perfect.",
    "Honestly I just need a long weekend to sleep.",
    "My inbox is a disaster, I'm declaring bankruptcy on it.",
    "I started a new series, it's slow but I think it gets better.",
    "It rained all weekend so we stayed in and played board games.",
    "The supermarket reorganised everything and now I can't find the rice.",
    "I'm thinking about repainting the kitchen, maybe a soft green.",
    "My back hurts from sitting all day, I need a better chair.",
    "We tried the new Thai place, the curry was spicy in a good way.",
    "I've been going to bed too late, need to fix that.",
    "The train was cancelled so I worked from home.",
    "I bought too many plants and now I'm running out of windowsills.",
    "Our internet went down for a whole day, it was oddly peaceful.",
    "I'm so ready for summer, I miss long evenings.",
    "My friend's band has a gig next week, should be fun.",
    "I cleaned out the garage and found my old school notebooks.",
    "The dentist said I need to floss more, classic.",
]
# Small talk written from parts, so the filler is as varied as real chatter.
CHAT = [
    "I {cooked} {food} {day} and {verdict}.",
    "We finally watched {show}, {opinion}.",
    "{day_cap} I spent hours {chore}, {feeling}.",
    "Have you been to {place}? We went {day} and {verdict}.",
    "My {person} called {day}, we talked about {topic} for an hour.",
    "I can't stop thinking about {topic}, {feeling}.",
    "The {thing} broke {day}, so I spent the evening {chore}.",
    "We're planning {plan} but nobody agrees on {topic}.",
    "{day_cap} was all about {chore}. Glamorous life.",
    "I tried {food} at {place} and {verdict}.",
    "My {person} keeps sending me videos about {topic}.",
    "Not much new here, mostly {chore} and {chore2}.",
    "Thinking of {plan}, what do you reckon?",
    "The meeting about {topic} ran two hours over, {feeling}.",
]
PARTS = {
    "cooked": ["cooked", "baked", "ordered", "burned", "tried making", "reheated"],
    "food": [
        "a mushroom risotto",
        "banana bread",
        "a spicy noodle soup",
        "tacos",
        "a lemon tart",
        "dumplings",
        "a huge lasagna",
        "vegetable curry",
        "shakshuka",
        "sourdough",
        "ramen",
        "a fruit salad",
    ],
    "day": ["on Tuesday", "last night", "this afternoon", "over the weekend", "on Friday", "earlier today"],
    "verdict": [
        "it was surprisingly good",
        "it was a total flop",
        "I'd go again",
        "it was fine, nothing special",
        "everyone loved it",
        "I regret nothing",
    ],
    "show": [
        "that detective series",
        "the new space documentary",
        "a silly baking competition",
        "the courtroom drama everyone mentions",
        "an old western",
        "the cooking show with the twins",
    ],
    "opinion": [
        "the ending was strange",
        "I fell asleep halfway",
        "the acting was brilliant",
        "it dragged a bit",
        "I already want the next season",
    ],
    "chore": [
        "sorting the laundry",
        "fixing the leaking tap",
        "cleaning the fridge",
        "answering emails",
        "assembling a bookshelf",
        "doing taxes",
        "repotting plants",
        "vacuuming the car",
        "ironing shirts",
        "organising the cupboard",
    ],
    "chore2": ["grocery runs", "paperwork", "dishes", "errands", "meal prep"],
    "feeling": [
        "which was oddly satisfying",
        "I'm wiped out",
        "not my favourite evening",
        "still annoyed about it",
        "feeling pretty good about it",
        "no regrets",
    ],
    "place": [
        "the market by the river",
        "that rooftop bar",
        "the new bakery on Elm Street",
        "the botanical garden",
        "the old cinema downtown",
        "the night market",
        "the seaside promenade",
        "the science museum",
    ],
    "person": ["mum", "dad", "grandad", "old school friend", "landlord", "boss", "uncle"],
    "topic": [
        "the election",
        "house prices",
        "electric cars",
        "the heatwave",
        "a new phone",
        "holiday plans",
        "the office move",
        "a football transfer",
        "the price of coffee",
        "a neighbour's fence",
    ],
    "thing": ["washing machine", "kettle", "bike chain", "laptop charger", "car battery", "shower head"],
    "plan": [
        "a weekend away",
        "redoing the bathroom",
        "a surprise party",
        "a road trip in the spring",
        "getting a bigger flat",
        "a picnic if the sun comes out",
    ],
}

REACT = [
    "That's great to hear!",
    "Haha, same here honestly.",
    "Oh no, that sounds rough.",
    "I know exactly what you mean.",
    "Wow, good for you.",
    "That made me laugh.",
    "Fair enough, one step at a time.",
    "Totally, I feel that.",
]
OPEN = ["Hey {O}! Long time no talk.", "Hi {O}, how's your week going?", "Morning {O}! Got a minute?", "Hey you!"]
CLOSE = ["Talk soon!", "Catch you later, take care.", "Okay, have to run. Bye!", "Good night!"]
WHEN = {
    "yesterday": 1,
    "last weekend": 6,
    "this morning": 0,
    "two days ago": 2,
    "last week": 7,
    "on Sunday": 3,
}


@dataclass(frozen=True)
class Question:
    """One question, the ids of the turns that hold its evidence, and its kind."""

    text: str
    evidence: tuple[str, ...]
    kind: str


@dataclass
class Conversation:
    """A conversation: its turns (oldest first), its questions, and how it was written."""

    seed: int
    speakers: tuple[str, str]
    messages: list[ChatMessage] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    asked_at: datetime | None = None
    style: str = ""


@dataclass
class _Fact:
    owner: int
    kind: str
    slot: tuple[str, str]
    turn: str = ""
    day: date | None = None


class _Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        rng = self.rng
        self.names = tuple(rng.sample(NAMES, 2))
        self.name_style = rng.choice(["name", "prefix"])
        self.dated = rng.random() < 0.8  # a session's date kept in created_at (else every turn is "now")
        self.messages: list[ChatMessage] = []
        self.turn_no = 0
        self.clock = datetime(rng.choice([2022, 2023]), rng.randint(1, 6), rng.randint(1, 28), 18, 0, tzinfo=UTC)

    def say(self, who: int, text: str) -> str:
        rng = self.rng
        self.turn_no += 1
        mid = f"c{self.seed}-t{self.turn_no}"
        name = self.names[who]
        stamp = self.clock + timedelta(minutes=self.turn_no % 400)
        body = text if self.name_style == "name" else f"{name}: {text}"
        fields: dict[str, object] = {"id": mid}
        if self.name_style == "name":
            fields["name"] = name
        if self.dated:
            fields["created_at"] = stamp
        role = "user" if who == 0 else "assistant"
        message = ChatMessage.user(body, **fields) if role == "user" else ChatMessage.assistant(body, **fields)
        self.messages.append(message)
        del rng
        return mid

    def small(self) -> str:
        rng = self.rng
        out = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.3:
                out.append(rng.choice(SMALL))
                continue
            text = rng.choice(CHAT)
            parts = {key: rng.choice(values) for key, values in PARTS.items()}
            parts["day_cap"] = parts["day"][0].upper() + parts["day"][1:]
            text = text.format(**parts)
            out.append(text[0].upper() + text[1:])
        return " ".join(out)


def _fill(template: str, slot: tuple[str, str], when: str, rel: str) -> str:
    text = template.format(x=slot[0], d=slot[1], when=when, rel=rel)
    return text[0].upper() + text[1:]


def build(seed: int) -> Conversation:
    """One conversation and its questions, the same for the same seed."""
    w = _Writer(seed)
    rng = w.rng
    names = w.names
    n_sessions = rng.randint(19, 32)
    # each person's facts: a few kinds each, some repeated as a second value later (a second hobby)
    kinds = list(KINDS)
    plan: list[_Fact] = []
    for owner in (0, 1):
        for kind in rng.sample(kinds, rng.randint(6, 8)):
            values = KINDS[kind]["values"]
            assert isinstance(values, list)
            plan.append(_Fact(owner, kind, rng.choice(values)))
    updates: list[tuple[int, str, list[str]]] = []
    for owner in (0, 1):
        for kind in rng.sample(list(UPDATES), rng.randint(1, 2)):
            values = UPDATES[kind]["values"]
            assert isinstance(values, list)
            updates.append((owner, kind, rng.sample(values, rng.randint(2, 3))))
    suggestions = rng.sample(SUGGEST, rng.randint(2, 4))
    # spread the events over the sessions (never in the last two, so every fact is old by the question)
    events: dict[int, list[tuple[str, object]]] = {}
    for fact in plan:
        events.setdefault(rng.randrange(0, n_sessions - 2), []).append(("fact", fact))
    for owner, kind, values in updates:
        spots = sorted(rng.sample(range(0, n_sessions - 2), len(values)))
        for k, (spot, value) in enumerate(zip(spots, values, strict=True)):
            events.setdefault(spot, []).append(("update", (owner, kind, value, k)))
    for s in suggestions:
        events.setdefault(rng.randrange(0, n_sessions - 2), []).append(("suggest", (rng.randint(0, 1), s)))
    stated_updates: dict[tuple[int, str], list[tuple[str, str]]] = {}
    given: list[tuple[int, int, tuple[str, str, str, str], str, str]] = []
    for session in range(n_sessions):
        w.clock += timedelta(days=rng.choice([3, 5, 7, 9, 12, 16, 21]), hours=rng.randint(-3, 3))
        first = rng.randint(0, 1)
        who = first
        w.say(who, rng.choice(OPEN).format(O=names[1 - who]))
        who = 1 - who
        w.say(who, rng.choice(REACT) + " " + w.small())
        todo = list(events.get(session, []))
        rng.shuffle(todo)
        fillers = rng.randint(10, 30)
        slots = sorted(rng.sample(range(fillers + len(todo)), len(todo)))
        k = 0
        for step in range(fillers + len(todo)):
            who = 1 - who
            if k < len(todo) and step == slots[k]:
                kind_of, item = todo[k]
                k += 1
                when = rng.choice(list(WHEN))
                if kind_of == "fact":
                    assert isinstance(item, _Fact)
                    spec = KINDS[item.kind]
                    who = item.owner
                    item.turn = w.say(who, _fill(rng.choice(spec["state"]), item.slot, when, ""))  # type: ignore[arg-type]
                    item.day = (w.clock - timedelta(days=WHEN[when])).date()
                    who = 1 - who
                    w.say(who, _fill(rng.choice(spec["reply"]), item.slot, when, ""))  # type: ignore[arg-type]
                    if rng.random() < 0.5:  # a third party's version of the same kind: a distractor
                        who = 1 - who
                        rel = rng.choice(RELATIVES)
                        other = rng.choice(spec["values"])  # type: ignore[arg-type]
                        w.say(who, _fill(rng.choice(spec["third"]), other, when, rel))  # type: ignore[arg-type]
                elif kind_of == "update":
                    owner, kind, value, nth = item  # type: ignore[misc]
                    spec = UPDATES[kind]
                    who = owner
                    templates = spec["first"] if nth == 0 else spec["again"]
                    mid = w.say(who, _fill(rng.choice(templates).replace("{v}", value), ("", ""), when, ""))  # type: ignore[arg-type]
                    stated_updates.setdefault((owner, kind), []).append((mid, value))
                    who = 1 - who
                    w.say(who, rng.choice(spec["reply"]))  # type: ignore[arg-type]
                else:
                    asker, (topic, problem, advice, key) = item  # type: ignore[misc]
                    who = asker
                    w.say(who, f"Any ideas for {problem}? I'm running out of patience.")
                    who = 1 - who
                    mid = w.say(who, f"Honestly, {advice}. It worked for me.")
                    given.append((asker, 1 - asker, (topic, problem, advice, key), mid, ""))
                    who = 1 - who
                    w.say(who, rng.choice(["I'll try that, thanks!", "Good idea, noted.", "Hmm, worth a shot."]))
            elif rng.random() < 0.35:
                w.say(who, rng.choice(REACT))
            else:
                w.say(who, w.small())
        who = 1 - who
        w.say(who, rng.choice(CLOSE))
    conversation = Conversation(seed, names, w.messages, style=f"{w.name_style}, {'dated' if w.dated else 'undated'}")
    conversation.asked_at = w.clock + timedelta(days=rng.randint(1, 40))
    conversation.questions = _questions(rng, names, plan, stated_updates, given, w.dated)
    return conversation


def _questions(
    rng: random.Random,
    names: tuple[str, str],
    plan: list[_Fact],
    updates: dict[tuple[int, str], list[tuple[str, str]]],
    given: list[tuple[int, int, tuple[str, str, str, str], str, str]],
    dated: bool,
) -> list[Question]:
    out: list[Question] = []
    for fact in plan:
        asks = KINDS[fact.kind]["ask"]
        assert isinstance(asks, dict)
        person = names[fact.owner]
        x = fact.slot[0]
        # a question shares a word with the evidence more often than not; the others are paraphrases
        single = asks["overlap"] if rng.random() < 0.6 else asks["single"]
        out.append(Question(rng.choice(single).format(P=person, x=x), (fact.turn,), "single"))
        if "temporal" in asks and rng.random() < 0.6:
            temporal = asks["overlap_temporal"] if rng.random() < 0.6 else asks["temporal"]
            out.append(Question(rng.choice(temporal).format(P=person, x=x), (fact.turn,), "temporal"))
    for owner in (0, 1):
        hobbies = [f for f in plan if f.owner == owner and KINDS[f.kind]["hobby"]]
        if len(hobbies) >= 2:
            text = rng.choice(["What hobbies has {P} picked up?", "What activities has {P} been doing for fun?"])
            out.append(Question(text.format(P=names[owner]), tuple(f.turn for f in hobbies), "multi"))
    for (owner, kind), stated in updates.items():
        spec = UPDATES[kind]
        person = names[owner]
        out.append(Question(rng.choice(spec["ask"]).format(P=person), (stated[-1][0],), "update"))  # type: ignore[union-attr]
        if len(stated) > 1:
            out.append(Question(rng.choice(spec["ask_first"]).format(P=person), (stated[0][0],), "update"))  # type: ignore[union-attr]
    if dated:
        by_month: dict[tuple[int, int, int], list[str]] = {}
        for fact in plan:
            if fact.day is not None:
                by_month.setdefault((fact.owner, fact.day.year, fact.day.month), []).append(fact.turn)
        for (owner, year, month), turns in sorted(by_month.items()):
            if len(turns) <= 3 and rng.random() < 0.3:
                text = f"What did {names[owner]} do in {MONTHS[month - 1]} {year}?"
                out.append(Question(text, tuple(turns), "dated"))
    for asker, adviser, (_, problem, _advice, _key), mid, _ in given:
        text = f"What did {names[adviser]} suggest to {names[asker]} for {problem}?"
        out.append(Question(text, (mid,), "other"))
    return out


def corpus(seeds: tuple[int, ...]) -> list[Conversation]:
    """The conversations of ``seeds``."""
    return [build(seed) for seed in seeds]


if __name__ == "__main__":
    from collections import Counter

    from ravi.agents.tokens import DEFAULT_COUNTER

    for split, seeds in (("development", TRAIN_SEEDS), ("held out", HELD_OUT_SEEDS)):
        data = corpus(seeds)
        kinds = Counter(q.kind for c in data for q in c.questions)
        tokens = [DEFAULT_COUNTER.count_messages(c.messages) for c in data]
        print(
            f"{split}: {len(data)} conversations, {sum(len(c.messages) for c in data)} turns, "
            f"{min(tokens):,}-{max(tokens):,} tokens, {sum(kinds.values())} questions {dict(kinds)}"
        )
    sample = build(0)
    for m in sample.messages[:12]:
        print(m.role, m.name, m.created_at.date(), m.text)
    for q in sample.questions[:8]:
        print(q)
