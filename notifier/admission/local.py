"""What this replica knows of full levels, so it can refuse an event without a store round trip.

A sliding log loses entries only with time, so a level value the script reported
full for a class stays full at least for the wait it returned (under one policy
snapshot: a new one voids everything). Until then this replica refuses events
whose path meets it, naming what the script would name: the level that stays full
longest (the upper one on a tie), its rule, and a wait no longer than the store's.

To name that level, every level of the event's path must be known well enough:
full (its wait is known), with room (wait 0), or bounded (no wait is longer than
its longest window, so a level full for longer than that outlasts it). Room is
learned from a refusal: the levels the script found with room beside a full one.
While the root is full nothing can be admitted anywhere, so that room stays (for
as long as the root's wait). Otherwise, or with reserves at the root (events of
another class could still pass it), admissions elsewhere could fill such a level,
so room is believed for ``OPEN_TRUST`` at most: within that second a refusal may
name the level it knows full where the store would name one filled meanwhile. The
refusal itself is always the store's: the level it names is full. Without this, a
category full while its reserve at the root has room (a storm in a reserved
category) would send every one of its events to the store. When the belief ends,
the first event that finds it ended asks the store, and the belief is kept while it
does, ``CHECK`` at most past its end: else every event that came before the answer
would ask too. A level that could not outlast the known one is not asked about.

An alert's key known refused (its firing event was refused) stays refused only
while no event of that key can be admitted anywhere, for the store would answer
its next repeat ``duplicate`` once one is. Events of one key may differ in
severity and fields, so in class and path; but at the root, and at a level keyed by
``category`` or ``status``, they all count under one value. So a key known refused
is refused here only when one such level is known full for every class its events
could have there (``critical`` if reserved; the ``LEVEL=VALUE`` classes they may
match). Without reserves there that is one class: the block itself.

This is the storm path: plain dicts keyed by the path's own cells (tuples built
once per kind of event by the router), tuples for what is known.
"""

from __future__ import annotations

from ..config import CRITICAL
from ..policy import Policy
from ..routing import Cell, Path
from ..tree import Reserves
from .batch import MAX_REMEMBERED, Wait

ALIKE_KEYS = ("category", "status")  # keys every firing event of one alert has one value of (the root too)

INFINITY = float("inf")
OPEN_TRUST = 1.0  # seconds room is believed to stay, when events could fill the level meanwhile
CHECK = 0.1  # seconds room is believed past OPEN_TRUST while one event asks the store again
# A level value known full for a class: (until (monotonic), level index, level name, value or
# None at the root, rule text). A tuple: a storm reads millions.
Block = tuple[float, int, str, str | None, str]


class FullLevels:
    """Level values known full (per class) or with room, under one policy snapshot."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._root_trust = OPEN_TRUST if policy.root.reserving else float("inf")
        self.blocked: dict[Cell, Block] = {}
        self.open: dict[Cell, float] = {}  # cells known to have room, until then
        self._asked: dict[Cell, float] = {}  # when an event last asked the store about a cell whose room ended
        self._bounds: dict[Cell, float] = {}  # the longest window (s) of a cell's rules: no wait is longer
        self._alike: dict[Path, tuple[tuple[Cell, ...], ...]] = {}  # per path: the cells an alert's events share
        self._key_until: dict[Path, float] = {}  # per path: until when its key is refused (see _key_blocked)
        self._answers: dict[Path, tuple[Block | None, float]] = {}  # per path: its refusal, until when it holds

    def refusal(self, path: Path, now: float, keyed: bool = False) -> Block | None:
        """The block that refuses an event of ``path`` now, as the store would name it; None when not known.

        ``keyed``: the event's alert key is known refused; it is refused only while no event of
        that key could be admitted (see the module's docstring). The answer is kept per path
        until the first moment it could change (a block or a belief in room ending, a level not
        known that could then outlast it) or until something new is learnt: a storm's events
        ask it once per kind of event, not once each.
        """
        known = self._answers.get(path)
        if known is None or known[1] <= now:
            known = self._answer(path, now)
            if len(self._answers) < MAX_REMEMBERED:
                self._answers[path] = known
        best = known[0]
        if best is None or (keyed and self._key_until.get(path, -1.0) <= now and self._key_blocked(path) <= now):
            return None
        return best

    def _answer(self, path: Path, now: float) -> tuple[Block | None, float]:
        """The block that refuses ``path`` now (else None), and until when that answer holds."""
        blocked, room, best, unknown, until = self.blocked, self.open, None, [], INFINITY
        for cell in path.cells:
            block = blocked.get(cell)
            if block is not None and block[0] > now:
                if best is None or block[0] > best[0]:  # strictly: the upper level wins a tie
                    best = block
                until = min(until, block[0])  # then this level is no longer known full
            elif room.get(cell, 0.0) > now:
                until = min(until, room[cell])  # then its room is no longer believed
            else:
                unknown.append(cell)
        if best is None:
            return None, INFINITY  # nothing refuses it until something is learnt
        asking = False
        for cell in unknown:  # one not known can stay full as long as its longest window
            end = now + self._bound(cell)
            if end > best[0] or (end == best[0] and cell[0] < best[1]):
                kept = self._kept(cell, now)
                if kept is None:
                    return None, INFINITY  # not known: the store is asked until it answers
                asking = asking or kept == now
                until = min(until, kept)
            else:
                until = min(until, best[0] - self._bound(cell))
        return (None, now) if asking else (best, until)  # asking: the next event sent asks for all its cells

    def _kept(self, cell: Cell, now: float) -> float | None:
        """Until when room in ``cell``, believed until less than ``CHECK`` ago, is still believed while
        one event asks the store again (``learn`` renews it); ``now`` while nobody has asked since it
        ended (the event asking now is to be sent: see :meth:`sent`); None when nothing is kept.

        So a storm sends one event per belief ended, not every event that arrives before the answer;
        and a belief is kept ``CHECK`` at most past the end the store's answer gave it.
        """
        ended = self.open.get(cell, -INFINITY)
        if now >= ended + CHECK:
            return None
        if self._asked.get(cell, -INFINITY) < ended:  # nobody asked since it ended
            return now
        return ended + CHECK

    def sent(self, path: Path, now: float) -> None:
        """An event of ``path`` goes to the store now: it asks for every cell whose room ended just before.

        Noted when it is sent, not when :meth:`refusal` answers None: a caller may ask twice, or
        find the event wrong before it goes, and the belief must not be kept without a question.
        """
        for cell in path.cells:
            ended = self.open.get(cell)
            if ended is not None and ended <= now < ended + CHECK:
                self._asked[cell] = now

    def _key_blocked(self, path: Path) -> float:
        """Until when a level shared by every event of the path's alert is full for all their classes
        (0: not known so); kept until what is known changes (the storm path asks once per key)."""
        groups = self._alike.get(path)
        if groups is None:
            groups = self._alike_cells(path)
            if len(self._alike) < MAX_REMEMBERED:
                self._alike[path] = groups
        never, until = (0.0,), 0.0
        for cells in groups:
            until = max(until, min(self.blocked.get(cell, never)[0] for cell in cells))
        if len(self._key_until) < MAX_REMEMBERED:
            self._key_until[path] = until
        return until

    def _alike_cells(self, path: Path) -> tuple[tuple[Cell, ...], ...]:
        """Per level every event of the alert counts under alike: its cell for each class they could have."""
        tree, groups = self._policy.tree, []
        alike = {i for i, level in enumerate(tree) if i == 0 or level.key in ALIKE_KEYS}
        for index in sorted(alike):
            value = path.values[index]
            classes = _possible(tree[index].reserves_of(value), path, alike, self._policy)
            groups.append(tuple((index, value, c) for c in classes))
        return tuple(groups)

    def _bound(self, cell: Cell) -> float:
        bound = self._bounds.get(cell)
        if bound is None:
            bound = self._policy.longest_ms(cell[0], cell[1]) / 1000
            if len(self._bounds) < MAX_REMEMBERED:
                self._bounds[cell] = bound
        return bound

    def learn(self, path: Path, waits: tuple[Wait, ...], sent: float) -> None:
        """Note what the script reported full (or with room) for an event of ``path`` it refused.

        Times count from when the call was sent, no later than the store's clock at
        execution, so a local refusal never outlasts the real one.
        """
        if len(self.blocked) > MAX_REMEMBERED or len(self.open) > MAX_REMEMBERED:
            self.clear()  # only a shortcut: forgetting costs round trips, not answers
        self._key_until.clear()  # what is full changes: computed again when asked
        self._answers.clear()
        root = waits[0].us / 1e6
        room = sent + (min(root, self._root_trust) if root else OPEN_TRUST)  # see the module's docstring
        for cell, wait in zip(path.cells, waits, strict=True):
            if wait.us:
                level, value = cell[0], cell[1]
                rules = self._policy.rules_for(level, value)
                name = self._policy.tree[level].name
                shown = value if level else None
                self.blocked[cell] = (sent + wait.us / 1e6, level, name, shown, rules[max(wait.rule, 1) - 1].text)
            else:
                self.open[cell] = room

    def clear(self) -> None:
        self.blocked.clear()
        self.open.clear()
        self._asked.clear()
        self._key_until.clear()
        self._answers.clear()


def _possible(reserves: Reserves, path: Path, alike: set[int], policy: Policy) -> list[int]:
    """The classes (indices; 0 = none) an event of the path's alert could have among ``reserves``.

    ``critical`` when reserved; then, for an event not critical, the classes in the order
    written until one it surely matches: a ``LEVEL=VALUE`` of a level in ``alike`` matches
    as the path does, any other may match; none when none surely matches.
    """
    classes = [i for i, reserve in enumerate(reserves, 1) if reserve.class_id == CRITICAL]
    for index, reserve in enumerate(reserves, 1):
        name, sep, value = reserve.class_id.partition("=")
        level = policy.level(name) if sep else None
        if level is None:
            continue
        if level not in alike:
            classes.append(index)
        elif path.values[level] == value:
            return [*classes, index]
    return [*classes, 0]
