"""The built-in text the byte-level BPE learns its first merges from: English, maths, code.

Small on purpose (the trainer runs in well under a second), but shaped like what RL
prompts hold: common English words, word problems with numbers, equations, and Python.
Every line is written here or generated deterministically (no randomness, no files), so
two machines learn the same merges.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import cycle

# Frequent English words, roughly most common first; each is fed to the trainer several
# times, after a space and capitalised, so it ends as whole tokens as in real vocabularies.
COMMON_WORDS = """
the of and to a in is it you that he was for on are with as his they be at one have this
from or had by not word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no
most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big high
such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer
school grow study still learn plant cover food sun four between state keep eye never last let
thought city tree cross farm hard start might story saw far sea draw left late run while press
close night real life few north open seem together next white children begin got walk example
ease paper group always music those both mark often letter until mile river car feet care second
book carry took science eat room friend began idea fish mountain stop once base hear horse cut
sure watch color face wood main enough plain girl usual young ready above ever red list though
feel talk bird soon body dog family direct pose leave song measure door product black short
numeral class wind question happen complete ship area half rock order fire south problem piece
told knew pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six table travel less
morning ten simple several vowel toward war lay against pattern slow center love person money
serve appear road map rain rule govern pull cold notice voice unit power town fine certain fly
fall lead cry dark machine note wait plan figure star box noun field rest correct able pound
done beauty drive stood contain front teach week final gave green oh quick develop ocean warm
free minute strong special mind behind clear tail produce fact street inch multiply nothing
course stay wheel full force blue object decide surface deep moon island foot system busy test
record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape
equate hot miss brought heat snow tire bring yes distant fill east paint language among grand
ball yet wave drop heart am present heavy dance engine position arm wide sail material size vary
settle speak weight general ice matter circle pair include divide syllable felt perhaps pick
sudden count square reason length represent art subject region energy hunt probable bed brother
egg ride cell believe fraction forest sit race window store summer train sleep prove lone leg
exercise wall catch mount wish sky board joy winter sat written wild instrument kept glass grass
cow job edge sign visit past soft fun bright gas weather month million bear finish happy hope
flower clothe strange gone jump baby eight village meet root buy raise solve metal whether push
seven paragraph third shall held hair describe cook floor either result burn hill safe cat
century consider type law bit coast copy phrase silent tall sand soil roll temperature finger
industry value fight lie beat excite natural view sense ear else quite broke case middle kill
son lake moment scale loud spring observe child straight consonant nation dictionary milk speed
method organ pay age section dress cloud surprise quiet stone tiny climb cool design poor lot
experiment bottom key iron single stick flat twenty skin smile crease hole trade melody trip
office receive row mouth exact symbol die least trouble shout except wrote seed tone join
suggest clean break lady yard rise bad blow oil blood touch grew cent mix team wire cost lost
brown wear garden equal sent choose fell fit flow fair bank collect save control decimal gentle
woman captain practice separate difficult doctor please protect noon whose locate ring character
insect caught period indicate radio spoke atom human history effect electric expect crop modern
element hit student corner party supply bone rail imagine provide agree thus capital chair
danger fruit rich thick soldier process operate guess necessary sharp wing create neighbor wash
bat rather crowd corn compare poem string bell depend meat rub tube famous dollar stream fear
sight thin triangle planet hurry chief colony clock mine tie enter major fresh search send
yellow gun allow print dead spot desert suit current lift rose continue block chart hat sell
success company subtract event particular deal swim term opposite wife shoe shoulder spread
arrange camp invent cotton born determine quart nine truck noise level chance gather shop
stretch throw shine property column molecule select wrong gray repeat require broad prepare
salt nose plural anger claim continent oxygen sugar death pretty skill women season solution
magnet silver thank branch match suffix especially fig afraid huge sister steel discuss forward
similar guide experience score apple bought led pitch coat mass card band rope slip win dream
evening condition feed tool total basic smell valley nor double seat arrive master track parent
shore division sheet substance favor connect post spend chord fat glad original share station
dad bread charge proper bar offer segment slave duck instant market degree populate chick dear
enemy reply drink occur support speech nature range steam motion path liquid log meant quotient
teeth shell neck hello please thanks okay
"""

MATHS_WORDS = """
sum difference product quotient remainder integer integers positive negative zero even odd
prime factor factors multiple divisible digit digits fraction fractions numerator denominator
percent percentage ratio proportion average mean median mode probability expected variance
equation equations variable variables solve solution solutions expression simplify evaluate
function functions derivative integral limit sequence series term terms polynomial root roots
quadratic linear coefficient constant slope intercept graph point points coordinate axis
triangle rectangle circle radius diameter circumference perimeter area volume angle angles
degrees parallel perpendicular hypotenuse theorem proof therefore hence thus given let suppose
minimum maximum greater less equal least most each per total altogether remaining left spent
bought sold costs price dollars cents hours minutes seconds days weeks months years miles
kilometers meters centimeters speed distance rate twice half third quarter double triple
answer final box boxed step steps reasoning compute calculate check verify result results
"""

INFLECTED_WORDS = """
friends numbers days years things times words students problems questions apples eggs
children books hours minutes dollars points people's others games cars trees boxes jumps
goes does makes takes gives comes looks wants needs uses works finds tells asks seems feels
tried used made called asked needed wanted looked worked started showed played moved lived
believed brought happened added answered counted bought paid sold spent saved earned shared
going making taking giving coming looking using working trying finding asking playing saying
better larger smaller faster longer bigger easier harder higher lower greater fewer
lazy quickly slowly really easily usually finally exactly probably together however
"""

PARAGRAPHS = """\
Reinforcement learning fine-tunes a language model by sampling responses to prompts,
scoring each response with a reward, and updating the policy so that better responses
become more likely. The reference model keeps the policy close to where it started.
Please reason step by step, and put your final answer within a box.
A farmer has 17 sheep. All but 9 run away. How many sheep does the farmer have left?
Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in
May. How many clips did Natalia sell altogether in April and May?
The weather was cold in the morning, but by the afternoon the sun had come out and the
children were playing in the park near the river.
You are a helpful assistant. Answer the question as clearly and briefly as you can.
I don't think it's going to rain today, but we'll see what happens. They're leaving soon.
What's the capital of France? The capital of France is Paris, which is also its largest city.
Write a function that returns the sum of the squares of the first n positive integers.
If the total cost is $12.50 and each notebook costs $2.50, then she bought 5 notebooks.
The area of a circle with radius r is pi times r squared, and its circumference is 2 pi r.
Let x be the number of apples. Then 3x + 5 = 20, so 3x = 15 and x = 5.
Therefore, the answer is 42.
It’s a “quoted” phrase — with a dash… and 5 × 3 ≤ 20, at 30 °C, in the café, naïve.
"""

CODE = '''\
def reward(prompt: str, response: str) -> float:
    """Return 1.0 when the response ends with the right answer, else 0.0."""
    answer = response.strip().split()[-1] if response.strip() else ""
    return 1.0 if answer == expected_answer(prompt) else 0.0


class Counter:
    def __init__(self, start=0):
        self.value = start

    def increment(self, step=1):
        self.value += step
        return self.value


for index, item in enumerate(items):
    if item is None:
        continue
    print(f"{index}: {item}")
import json
import numpy as np
result = json.loads(text)
matrix = np.zeros((3, 4), dtype=np.float32)
'''

_NAMES = ("Alice", "Bob", "Maria", "James", "Liam", "Olivia", "Noah", "Emma", "Sophia", "Lucas")
_ITEMS = ("apples", "books", "marbles", "cookies", "pencils", "stickers", "cards", "flowers")
_VERBS = ("buys", "finds", "sells", "gives away", "collects", "eats", "loses", "makes")


def word_problems(count: int = 160) -> Iterator[str]:
    """`count` short arithmetic word problems and their worked answers, generated in order."""
    names, items, verbs = cycle(_NAMES), cycle(_ITEMS), cycle(_VERBS)
    for i in range(count):
        a, b = 3 + (i * 7) % 90, 2 + (i * 13) % 40
        name, item, verb = next(names), next(items), next(verbs)
        yield (
            f"{name} has {a} {item} and {verb} {b} more each day for {i % 6 + 2} days. "
            f"How many {item} does {name} have? {a} + {b} * {i % 6 + 2} = "
            f"{a + b * (i % 6 + 2)}. The answer is {a + b * (i % 6 + 2)}."
        )


def equations(count: int = 120) -> Iterator[str]:
    """`count` one-line equations (linear, quadratic, fractions) with their solutions."""
    for i in range(count):
        a, b, c = 2 + i % 9, 1 + (i * 5) % 17, 3 + (i * 11) % 23
        yield f"Solve {a}x + {b} = {a * c + b}. Subtract {b}: {a}x = {a * c}, so x = {c}."
        yield f"({a} + {b})^2 = {(a + b) ** 2} and {a}/{c} + {b}/{c} = {a + b}/{c}."


def corpus_lines() -> Iterator[str]:
    """Everything the trainer reads, one line at a time (deterministic order)."""
    words = f"{COMMON_WORDS} {MATHS_WORDS} {INFLECTED_WORDS}".split()
    for rank, word in enumerate(words):
        repeats = 2 + 6 // (1 + rank // 150)  # frequent words a little more often
        # capitalised at the start of a line too, as at the start of a sentence
        yield " ".join([word.capitalize()] + [word] * repeats + [word.capitalize()])
    # whole, so that newlines and indentation runs are learned too
    yield PARAGRAPHS
    yield CODE
    yield from word_problems()
    yield from equations()
