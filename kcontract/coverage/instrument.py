"""A CUDA source with a counter per block and per `if` outcome, gcov-style, as a patch of the production source.

Every compound statement inside a function body (a function's, an `if`'s, `else`'s, a loop's, a bare block) gets
`kcontract_cov_hit(i);` right after its `{`, an unbraced loop body is braced with one, each `case` of a
`switch` gets one after its label, and every `if` (not `if constexpr`) has its condition wrapped as
`kcontract_cov_branch((cond), t, f)`, which notes the outcome taken. The counters are `__device__` variables
declared on a line put first; nothing else moves, so every other line keeps its number. A source line counts
as code when it lies inside a function body and holds more than braces, so each code line belongs to one
probe: its innermost block, or the branch outcome whose unbraced statement it is. Loop exits and the operands
of `?:`, `&&` and `||` have no probes of their own. A `constexpr` or `consteval` function's body gets none
either: the compiler may run it (a template argument, `__launch_bounds__`), where a probe cannot be called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

COUNTER = "kcontract_cov_{}"  # one __device__ variable per probe, 1 once it ran (a name of its own, so the
SIZE = "kcontract_cov_size"  # compiled code names each probe it can reach); how many there are
PROLOGUE = ("__device__ unsigned int {size} = {n}; __device__ unsigned int {counters}; "
            "__device__ __forceinline__ void kcontract_cov_hit(unsigned int& c) {{ if (c == 0u) c = 1u; }} "
            "__device__ __forceinline__ bool kcontract_cov_branch(bool c, unsigned int& t, unsigned int& f) {{ "
            "if (c) kcontract_cov_hit(t); else kcontract_cov_hit(f); return c; }}\n")
HIT = " kcontract_cov_hit(kcontract_cov_{i});"
CODE_BEFORE = {")", "else", "do", "{", "}", ";", ":", "const", "noexcept", "override", "final", "mutable"}
TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<pre>^[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<space>\s+)
  | (?P<punct>::|.)
""", re.S | re.M | re.X)


@dataclass
class Probe:
    """One counter: a block entered, or an `if`'s outcome."""

    ident: int
    line: int  # the source line of the block's `{` or of the `if`
    kind: str  # "block", "then" or "else"


@dataclass
class Instrumented:
    """The instrumented text, its probes, and for each code line the probe that covers it."""

    text: str
    probes: list[Probe] = field(default_factory=list)
    lines: dict[int, int] = field(default_factory=dict)  # code line -> probe ident
    branches: list[tuple[int, int, int]] = field(default_factory=list)  # (line, then probe, else probe) per `if`


@dataclass
class _Token:
    kind: str
    text: str
    start: int
    end: int
    line: int


def tokens(source: str) -> list[_Token]:
    """Significant tokens (no spaces, comments or preprocessor lines) with their offsets and lines."""
    out, line = [], 1
    for m in TOKEN.finditer(source):
        kind = m.lastgroup
        if kind not in ("space", "comment", "pre"):
            out.append(_Token(kind, m.group(), m.start(), m.end(), line))
        line += m.group().count("\n")
    return out


def _match(toks: list[_Token], i: int, open_: str, close: str) -> int:
    """The index of the token closing the bracket opened at `i`."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == open_:
            depth += 1
        elif toks[j].text == close:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


class _Walker:
    """Finds the probes of one source."""

    def __init__(self, source: str):
        self.source = source
        self.toks = tokens(source)
        self.inserts: list[tuple[int, str]] = []  # (offset, text) to insert
        self.result = Instrumented("")
        self.owner: dict[int, int] = {}  # token index -> probe covering it

    def probe(self, line: int, kind: str) -> int:
        ident = len(self.result.probes)
        self.result.probes.append(Probe(ident, line, kind))
        return ident

    def walk(self) -> None:
        frames: list[list] = []  # per open brace: [kind ("code", "switch" or "other"), the probe covering it]
        toks = self.toks
        i = 0
        while i < len(toks):
            t = toks[i]
            inside = bool(frames) and frames[-1][0] != "other"
            if t.text == "{":
                prev = toks[i - 1].text if i else ""
                code = prev in CODE_BEFORE and not (prev in ("{", "}", ";", ":") and not inside)
                if code and not inside and self._compile_time(i):
                    i = _match(toks, i, "{", "}") + 1
                    continue
                if code and self._switch_block(i):
                    frames.append(["switch", frames[-1][1] if frames else -1])
                elif code:
                    ident = self.probe(t.line, "block")
                    self.inserts.append((t.end, HIT.format(i=ident)))
                    frames.append(["code", ident])
                else:
                    frames.append(["other", frames[-1][1] if frames else -1])
            elif t.text == "}":
                if frames:
                    frames.pop()
            elif inside and frames[-1][0] == "switch" and t.text in ("case", "default"):
                colon = next(j for j in range(i, len(toks)) if toks[j].text == ":")
                ident = self.probe(t.line, "block")
                self.inserts.append((toks[colon].end, HIT.format(i=ident)))
                frames[-1][1] = ident
            elif inside and t.text == "if" and i + 1 < len(toks):
                self.owner.setdefault(i, frames[-1][1])
                i = self._branch(i)
                continue
            elif inside and t.text in ("for", "while") and i + 1 < len(toks) and toks[i + 1].text == "(":
                self.owner.setdefault(i, frames[-1][1])
                self._loop_body(i)
            if frames and frames[-1][1] >= 0 and (inside or frames[-1][0] == "other"):
                self.owner.setdefault(i, frames[-1][1])
            i += 1

    def _compile_time(self, i: int) -> bool:
        """Whether the `{` at i opens the body of a `constexpr` or `consteval` function (its head runs back to the
        previous `;`, `{` or `}`)."""
        for j in range(i - 1, -1, -1):
            text = self.toks[j].text
            if text in (";", "{", "}"):
                return False
            if text in ("constexpr", "consteval"):
                return True
        return False

    def _switch_block(self, i: int) -> bool:
        """Whether the `{` at i opens a switch's body (a probe there could never run before its first case)."""
        if self.toks[i - 1].text != ")":
            return False
        depth = 0
        for j in range(i - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(self.toks[j].text, 0)
            if depth == 0:
                return j > 0 and self.toks[j - 1].text == "switch"
        return False

    def _branch(self, i: int) -> int:
        """Wrap the `if` at i (not `if constexpr`, not one with an init statement); lines of an unbraced then or
        else statement belong to its outcome's probe. Returns the index to go on from (the `(`)."""
        toks = self.toks
        j = i + 1
        if toks[j].text == "constexpr" or toks[j].text != "(":
            return j
        close = _match(toks, j, "(", ")")
        if any(toks[k].text == ";" for k in range(j + 1, close)):
            return j
        then = self.probe(toks[i].line, "then")
        other = self.probe(toks[i].line, "else")
        self.result.branches.append((toks[i].line, then, other))
        self.inserts.append((toks[j].end, "kcontract_cov_branch(("))
        self.inserts.append((toks[close].start, f"), {COUNTER.format(then)}, {COUNTER.format(other)})"))
        self._statement_owner(close + 1, then)
        end = self._statement_end(close + 1)
        if end + 1 < len(toks) and toks[end + 1].text == "else":
            self.owner.setdefault(end + 1, other)
            self._statement_owner(end + 2, other)
        return j

    def _loop_body(self, i: int) -> None:
        """An unbraced loop body gets braces and a probe of its own (a braced one has its block probe; `while`
        closing a `do`, or with an empty body, has none)."""
        toks = self.toks
        k = _match(toks, i + 1, "(", ")") + 1
        if k >= len(toks) or toks[k].text in ("{", ";"):
            return
        end = self._statement_end(k)
        ident = self.probe(toks[k].line, "block")
        self.inserts.append((toks[k].start, "{" + HIT.format(i=ident) + " "))
        self.inserts.append((toks[end].end, " }"))
        for j in range(k, end + 1):
            self.owner.setdefault(j, ident)

    def _statement_end(self, k: int) -> int:
        """The last token of the statement starting at k."""
        toks = self.toks
        if k >= len(toks):
            return len(toks) - 1
        if toks[k].text == "{":
            return _match(toks, k, "{", "}")
        if toks[k].text in ("if", "for", "while", "switch") and k + 1 < len(toks) and toks[k + 1].text in ("(",
                                                                                                       "constexpr"):
            paren = k + 1 if toks[k + 1].text == "(" else k + 2
            end = self._statement_end(_match(toks, paren, "(", ")") + 1)
            if toks[k].text == "if" and end + 1 < len(toks) and toks[end + 1].text == "else":
                end = self._statement_end(end + 2)
            return end
        depth = 0
        for j in range(k, len(toks)):
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(toks[j].text, 0)
            if depth == 0 and toks[j].text == ";":
                return j
        return len(toks) - 1

    def _statement_owner(self, k: int, ident: int) -> None:
        """An unbraced statement's tokens belong to `ident` (a braced one has its own block probe)."""
        if k >= len(self.toks) or self.toks[k].text == "{":
            return
        if self.toks[k].text == "if":
            self.owner.setdefault(k, ident)
            return
        for j in range(k, self._statement_end(k) + 1):
            self.owner.setdefault(j, ident)

    def finish(self) -> Instrumented:
        text = self.source
        for offset, piece in sorted(self.inserts, key=lambda x: -x[0]):
            text = text[:offset] + piece + text[offset:]
        counters = ", ".join(COUNTER.format(p.ident) for p in self.result.probes) or COUNTER.format(0)
        self.result.text = PROLOGUE.format(size=SIZE, n=len(self.result.probes), counters=counters) + text
        lines: dict[int, int] = {}
        for index, ident in sorted(self.owner.items()):
            t = self.toks[index]
            if ident >= 0 and t.text not in ("{", "}"):
                lines.setdefault(t.line, ident)
        self.result.lines = lines
        return self.result


def instrument(source: str) -> Instrumented:
    """The source with its probes; line numbers are the original source's (the prologue is a line put first)."""
    walker = _Walker(source)
    walker.walk()
    return walker.finish()
