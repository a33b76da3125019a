"""The templated language of the G-VUE tasks generated from vcbench-nav (`nav_tasks.py`).

Each function reads the facts of one view (`nav_views.View`) and returns the texts it supports,
each unambiguous among the view's visible objects by construction; which templates exist and
what their labels mean is documented once, in the task builders of `nav_tasks.py`. Text tasks
only use views without a glimpsed object (`View.glimpsed`), so "the objects in view" is well
defined: the view's `things`.

Words: categories and rooms by their scene.py index; an object's attribute by its texture
(`ATTRIBUTES`, every object material has one); an object's side by the third of the image its
pixels' mean column falls in.
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from vcbench.data.gvue.nav_views import Thing, View
from vcbench.envs.nav import textures

CATEGORY = {1: "chair", 2: "bed", 3: "plant", 4: "toilet", 5: "TV", 6: "sofa"}
PLURAL = {1: "chairs", 2: "beds", 3: "plants", 4: "toilets", 5: "TVs", 6: "sofas"}
ROOM = ("living room", "bedroom", "kitchen", "bathroom", "corridor", "office")
NUMBER = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ATTRIBUTES = {textures.material_id(name): word for name, word in (
    ("chair_oak", "light wooden"), ("chair_walnut", "dark wooden"),
    ("bed_rose", "pink"), ("bed_mustard", "yellow"),
    ("plant_leaves", "broad-leaved"), ("plant_leaves_dark", "dark-leaved"),
    ("plant_grass_skimage_photo", "grassy"), ("toilet_ceramic", "white"),
    ("tv_black_bezel", "black"), ("tv_silver_bezel", "silver"),
    ("sofa_navy", "blue"), ("sofa_burgundy", "red"))}
SIDE_GAP = 0.1     # of the image width between objects for "left of" / "the one on the left".
NEAR_GAP = 0.3     # metres between the nearest object of a category and the next.
SIDES = ("left", "middle", "right")


def article(phrase: str) -> str:
  return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


def capitalised(text: str) -> str:
  return text[:1].upper() + text[1:]   # str.capitalize would lower "TV".


def side(thing: Thing) -> str:
  return SIDES[min(int(thing.centre_x * 3), 2)]


def referent(category: int, material: int, where: str) -> str:
  """'the blue sofa on the left' (`where` in SIDES; 'in the middle' for the middle)."""
  place = "in the middle" if where == "middle" else f"on the {where}"
  return f"the {ATTRIBUTES[material]} {CATEGORY[category]} {place}"


def kind_counts(view: View) -> dict[tuple[int, int], int]:
  """How many visible objects of each (category, material)."""
  return dict(collections.Counter((t.category, t.material) for t in view.things))


def described(counts: dict[tuple[int, int], int]) -> str:
  """'two dark wooden chairs, a light wooden chair and a blue sofa' from (category, material)
  counts: categories in CATEGORY order, then materials by id; zero counts are left out."""
  parts = [article(f"{ATTRIBUTES[m]} {CATEGORY[c]}") if n == 1
           else f"{NUMBER[n]} {ATTRIBUTES[m]} {PLURAL[c]}"
           for (c, m), n in sorted(counts.items()) if n > 0]
  return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def category_counts(view: View) -> dict[int, int]:
  counts: dict[int, int] = {}
  for t in view.things:
    counts[t.category] = counts.get(t.category, 0) + 1
  return counts


# ---------------------------------------------------------------------------------------------
# Phrase grounding.

GROUNDING_TEMPLATES = ("category", "attribute", "side", "nearest", "room")


def _of(view: View, category: int) -> list[Thing]:
  return [t for t in view.things if t.category == category]


def _extreme_side(same: list[Thing], thing: Thing, direction: int) -> bool:
  """`thing` is its category's outermost towards `direction` (-1 left), clear of the others."""
  on_that_half = direction * (thing.centre_x - 0.5) > 0
  others = [t for t in same if t is not thing]
  return on_that_half and all(direction * (thing.centre_x - t.centre_x) >= SIDE_GAP
                              for t in others)


def expressions(view: View) -> dict[str, list[tuple[Thing, str]]]:
  """Per grounding template, the (thing, expression) pairs that pick exactly one visible thing."""
  out = {name: [] for name in GROUNDING_TEMPLATES}
  for thing in view.things:
    same = _of(view, thing.category)
    name = CATEGORY[thing.category]
    if len(same) == 1:
      out["category"].append((thing, f"the {name}"))
    if sum(t.material == thing.material for t in same) == 1:
      out["attribute"].append((thing, f"the {ATTRIBUTES[thing.material]} {name}"))
    for direction, word in ((-1, "left"), (1, "right")):
      if _extreme_side(same, thing, direction):
        out["side"].append((thing, f"the {name} on the {word}"))
    if len(same) > 1 and all(t.depth - thing.depth >= NEAR_GAP for t in same if t is not thing):
      out["nearest"].append((thing, f"the {name} nearest to the camera"))
    if sum(t.room_type == thing.room_type for t in same) == 1:
      out["room"].append((thing, f"the {name} in the {ROOM[thing.room_type]}"))
  return out


# ---------------------------------------------------------------------------------------------
# Captions.

def captions(view: View) -> tuple[str, ...]:
  """Four captions of a view with at least one visible object: inventory, its paraphrase,
  layout, nearest object (distance to the half metre)."""
  place = article(ROOM[view.room_type]) if view.room_type >= 0 else "a home"
  listing = described(kind_counts(view))
  name = lambda t: article(f"{ATTRIBUTES[t.material]} {CATEGORY[t.category]}")
  left, right = view.things[0], view.things[-1]
  if len(view.things) == 1:
    where = "in the middle" if side(left) == "middle" else f"on the {side(left)}"
    layout = f"{capitalised(name(left))} {where} of the view."
  else:
    layout = f"{capitalised(name(left))} on the left and {name(right)} on the right."
  nearest = min(view.things, key=lambda t: t.depth)
  metres = max(0.5, round(2 * nearest.depth) / 2)
  unit = "metre" if metres == 1 else "metres"
  return (f"{capitalised(place)} with {listing}.",
          f"{capitalised(listing)} in {place}.",
          layout,
          f"The nearest object is {name(nearest)}, about {metres:g} {unit} away.")


# ---------------------------------------------------------------------------------------------
# VQA.

ANSWERS = ("0", "1", "2", "3", "yes", "no", "chair", "bed", "plant", "toilet", "tv", "sofa",
           *ROOM)
QUESTION_TYPES = ("count", "exist", "relation", "room")
# Counts each category's question may have as its answer (what the apartments show often
# enough to balance; views with other counts are not asked that question).
COUNT_ANSWERS = {1: (0, 1, 2, 3), 2: (0, 1), 3: (0, 1, 2), 4: (0, 1), 5: (0, 1), 6: (0, 1)}
# Answers each relation subject may get, in both directions (pairs the furnishing rules let
# share a view often enough; a toilet's only neighbour would be a plant, so it is no subject).
RELATION_ANSWERS = {3: (1, 6, 5, 4, 2), 1: (3, 5, 6, 2), 6: (3, 1, 5), 5: (3, 1, 6, 2),
                    2: (1, 5, 3)}


def answer_word(category: int) -> str:
  return CATEGORY[category].lower()


def count_question(category: int) -> str:
  return f"How many {PLURAL[category]} are there?"


def exist_question(category: int) -> str:
  return f"Is there {article(CATEGORY[category])}?"


def relation_question(direction: int, category: int) -> str:
  return f"What is to the {'left' if direction < 0 else 'right'} of the {CATEGORY[category]}?"


ROOM_QUESTION = "What room is this?"


def relation_answer(view: View, direction: int, subject: Thing) -> Optional[int]:
  """The one category of everything beyond `subject` towards `direction`, if unambiguous."""
  others = [t for t in view.things if t is not subject]
  if any(abs(t.centre_x - subject.centre_x) < SIDE_GAP for t in others):
    return None
  beyond = {t.category for t in others if direction * (t.centre_x - subject.centre_x) > 0}
  return beyond.pop() if len(beyond) == 1 else None


def questions(view: View) -> dict[tuple, str]:
  """Every (type, question, answer) key this view answers, to the question text."""
  counts = category_counts(view)
  out = {}
  for c in CATEGORY:
    n = counts.get(c, 0)
    if n in COUNT_ANSWERS[c]:
      out[("count", count_question(c), str(n))] = count_question(c)
    out[("exist", exist_question(c), "yes" if n else "no")] = exist_question(c)
  for subject in view.things:
    if counts[subject.category] != 1 or subject.category not in RELATION_ANSWERS:
      continue
    for direction in (-1, 1):
      answer = relation_answer(view, direction, subject)
      if answer in RELATION_ANSWERS[subject.category]:
        q = relation_question(direction, subject.category)
        out[("relation", q, answer_word(answer))] = q
  if view.room_type >= 0:
    out[("room", ROOM_QUESTION, ROOM[view.room_type])] = ROOM_QUESTION
  return out


def question_keys() -> list[tuple]:
  """Every (type, question, answer) key `questions` can offer."""
  keys = [("count", count_question(c), str(n)) for c in CATEGORY for n in COUNT_ANSWERS[c]]
  keys += [("exist", exist_question(c), a) for c in CATEGORY for a in ("yes", "no")]
  keys += [("relation", relation_question(d, c), answer_word(a))
           for c, answers in RELATION_ANSWERS.items() for d in (-1, 1) for a in answers]
  return keys + [("room", ROOM_QUESTION, room) for room in ROOM]


# ---------------------------------------------------------------------------------------------
# Commonsense (VCR format).

# (question, categories that answer it, categories never offered as a choice because whether
# they answer it is arguable).
AFFORDANCES = (
    ("Where could someone sit down?", (1, 6), (2, 4)),
    ("Where would someone sleep at night?", (2,), (6,)),
    ("What would someone switch on to watch the news?", (5,), ()),
    ("What needs watering now and then?", (3,), ()),
    ("What would someone use after drinking a lot of water?", (4,), ()),
)
NUM_CHOICES = 4


def _invented(rng, categories, seen: set[tuple[int, int]], taken: set[str]) -> Optional[str]:
  """A referent of one of `categories` whose kind (category and material) is not in view at
  all, so no reading of "left" or "middle" can make it name a visible thing."""
  kinds = [(c, m) for c in categories for m in textures.OBJECT_MATERIALS[c]
           if (c, m) not in seen]
  for i in rng.permutation(len(kinds)):
    c, m = kinds[i]
    text = referent(c, m, str(rng.choice(SIDES)))
    if text not in taken:
      return text
  return None


def commonsense(rng: np.random.Generator, view: View, which: int) -> Optional[tuple[str, ...]]:
  """(question, right choice, three wrong choices) for affordance `which`, or None.

  The view must show exactly one object that answers the question; the wrong choices are
  referents of visible objects that do not (at most two) and, to fill up, invented referents
  of kinds (category and material) not in view: one of an answering category first (where
  one is left), so that the question's text alone cannot single out the right choice.
  """
  question, right, unclear = AFFORDANCES[which]
  answering = [t for t in view.things if t.category in right]
  if len(answering) != 1:
    return None
  seen = {(t.category, t.material) for t in view.things}
  truth = referent(answering[0].category, answering[0].material, side(answering[0]))
  others = sorted({referent(t.category, t.material, side(t)) for t in view.things
                   if t.category not in right + unclear})
  wrong = [others[i] for i in rng.permutation(len(others))[:2]]
  wrong_categories = [c for c in CATEGORY if c not in right + unclear]
  for pool in [right] + [wrong_categories] * NUM_CHOICES:
    if len(wrong) == NUM_CHOICES - 1:
      break
    made = _invented(rng, pool, seen, set(wrong) | {truth})
    if made is not None:   # None: every kind of the pool is in view (the one toilet kind).
      wrong.append(made)
  return (question, truth, *wrong) if len(wrong) == NUM_CHOICES - 1 else None
