"""Systematic operator mutants of the checker (issue 28): the generator.

Where tests/mutation/mutants.py lists bugs someone thought of, this enumerates the classic
operator mutants over every source file matched by SOURCES, so nobody picks them:

  rel     relational boundary flips      <  <=  >  >=  (each to its neighbour: < -> <=, ...)
  eq      equality flips                 == -> !=, != -> ==
  and/or  && -> ||, || -> &&, and each operand dropped (a && b -> a, a && b -> b)
  if      if (c) -> if (true), if (false); with an else also if (!c) (the branches swapped)
  tern    c ? x : y -> c ? y : x
  not     !x -> x
  lit     an integer literal next to a comparison, + or -, or alone in [ ] -> n + 1, n - 1

How it reads C++ (deliberately simple, so anyone can check what it does): a tokenizer that drops
comments, preprocessor lines and string/char literals (kept verbatim, never mutated); brackets
( [ { matched; a `<` counts as a template bracket when an identifier precedes it and a matching
`>` follows with only type-like tokens between; an operator's operands are found by walking
outwards over tokens and bracketed groups until an operator that binds less tightly (C++
precedence), a separator (; , ? : =) or an unmatched bracket. Skipped: static_assert, constexpr
and consteval statements and bodies, template arguments, decltype/sizeof/noexcept/alignas,
case labels, enum bodies, `if constexpr`, conditions that declare a variable.

Each mutant has a stable id `file|function|kind|original -> replacement` (a `#2`, `#3` suffix
when one function has the same text twice), the enclosing function being the one whose body
holds it; line and column are reported beside it but are not part of it, so code moving within
a file does not rename a mutant.

Mutant schemata: every site is rewritten into a call of tests/mutation/schemata.hpp
(`a < b` -> `::gdrpeer_mutant::lt(N, a, b)`), so one build holds all mutants and
GDRPEER_MUTANT=N picks the live one at run time. The rewrite inserts no newline: a compiler
error's line is the site's line, and run_generated.py drops the sites on such lines (reported
"not built") and builds again.

Usage: python3 tests/mutation/generate.py [--list] [FILE...]
"""

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]

# The one place that says where things are (the lead fixes these when files move).
TOPO_SRC = "userspace/topo/src"
SOURCES = [f"{TOPO_SRC}/{g}" for g in (
    "classify.cpp", "rules.cpp", "rules_*.cpp", "stack_*.cpp", "readiness_*.cpp",
    "node_verdict.cpp", "parse_*.cpp", "sysfs_pci.cpp", "sysfs_cpu.cpp",
    # The hand-written XML reader issue 28 kept (docs/design.md says why): last, so that adding
    # it left every other mutant's number as it was.
    "xml_reader.cpp")]
EXCLUDED: set = set()
# The CMake target whose sources get the schemata header force-included.
TARGET = "gdrpeer_topo"
TARGET_CMAKE = "userspace/topo/CMakeLists.txt"


def source_files(repo: Path = REPO) -> List[str]:
    out = []
    for pattern in SOURCES:
        for p in sorted(repo.glob(pattern)):
            rel = str(p.relative_to(repo))
            if rel not in EXCLUDED and rel not in out:
                out.append(rel)
    return out


# ---- tokens ------------------------------------------------------------------------------------

PUNCT = sorted("""<=> <<= >>= ... ->* :: -> ++ -- << >> <= >= == != && || += -= *= /= %= &= |= ^= .*
               { } [ ] ( ) ; : , . ? ~ ! + - * / % ^ & | = < > #""".split(), key=len, reverse=True)
TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\\n])*")
  | (?P<chr>(?:u8|[uUL])?'(?:\\.|[^'\\\n])+')
  | (?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|\d[\d']*(?:\.[\d']*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uUlLfFzZ]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<punct>""" + "|".join(re.escape(p) for p in PUNCT) + r""")
""", re.X | re.S)

KEYWORDS_STOP = {"return", "co_return", "throw", "case", "else", "do", "co_yield", "default",
                 "goto", "new", "delete"}
SKIP_PAREN_KEYWORDS = {"static_assert", "decltype", "sizeof", "noexcept", "alignas", "alignof",
                       "requires", "__attribute__", "typeid", "offsetof"}
TYPEISH = {"const", "volatile", "unsigned", "signed", "typename", "struct", "class", "auto"}

PREC = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11, "<=>": 10,
        "<": 9, "<=": 9, ">": 9, ">=": 9, "==": 8, "!=": 8, "&": 7, "^": 6, "|": 5,
        "&&": 4, "||": 3, "?": 2}
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}
SEPARATORS = {";", ",", "?", ":", "{", "}"} | ASSIGN


@dataclass
class Tok:
    kind: str  # id num str punct
    text: str
    start: int
    end: int
    line: int
    col: int


def tokenize(text: str) -> List[Tok]:
    toks, pos, line_starts = [], 0, [0]
    for m in re.finditer(r"\n", text):
        line_starts.append(m.end())

    def where(off):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= off:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, off - line_starts[lo] + 1

    at_line_start = True
    while pos < len(text):
        if at_line_start:
            m = re.match(r"[ \t]*#(?:[^\n\\]|\\.)*", text[pos:], re.S)
            if m:  # a preprocessor line (with its continuations): not code to mutate
                pos += m.end()
                continue
        m = TOKEN_RE.match(text, pos)
        if not m:
            raise ValueError(f"cannot tokenize at offset {pos}: {text[pos:pos + 20]!r}")
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind == "ws":
            at_line_start = "\n" in m.group() or at_line_start and not m.group().strip()
            pos = m.end()
            continue
        at_line_start = False
        if kind != "comment":
            k = {"raw": "str", "chr": "str"}.get(kind, kind)
            line, col = where(m.start())
            toks.append(Tok(k, m.group(), m.start(), m.end(), line, col))
        pos = m.end()
    return toks


# ---- structure -----------------------------------------------------------------------------------

OPEN = {"(": ")", "[": "]", "{": "}"}


class Parsed:
    """Tokens with their brackets matched (templates' < > too) and each token's function."""

    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.match: Dict[int, int] = {}
        self.template: set = set()  # indices of < and > that are template brackets
        self._match_brackets()
        self._match_templates()
        self.func: List[str] = [""] * len(self.toks)
        self.skip: List[bool] = [False] * len(self.toks)
        self._scopes()

    def t(self, i) -> str:
        return self.toks[i].text if 0 <= i < len(self.toks) else ""

    def _match_brackets(self):
        stack = []
        for i, tk in enumerate(self.toks):
            if tk.kind != "punct":
                continue
            if tk.text in OPEN:
                stack.append(i)
            elif tk.text in (")", "]", "}"):
                while stack and OPEN[self.toks[stack[-1]].text] != tk.text:
                    stack.pop()  # unbalanced: tolerate
                if stack:
                    j = stack.pop()
                    self.match[i], self.match[j] = j, i

    def _split_shift(self, i):
        """Splits a `>>` token into two `>` (it closes two template brackets)."""
        tk = self.toks[i]
        a = Tok("punct", ">", tk.start, tk.start + 1, tk.line, tk.col)
        b = Tok("punct", ">", tk.start + 1, tk.end, tk.line, tk.col + 1)
        self.toks[i:i + 1] = [a, b]
        self._match_brackets_reset()

    def _match_brackets_reset(self):
        self.match = {}
        self.template = set()
        self._match_brackets()

    def _template_close(self, i) -> Optional[int]:
        """If the < at i opens template arguments, the index of its >, else None."""
        prev = self.toks[i - 1] if i else None
        if not prev or not (prev.kind == "id" and prev.text not in KEYWORDS_STOP or prev.text == "template"):
            return None
        depth, j = 1, i + 1
        while j < len(self.toks):
            tx = self.toks[j].text
            if tx in ("(", "["):
                if j not in self.match:
                    return None
                j = self.match[j] + 1
                continue
            if tx == "<":
                depth += 1
            elif tx == ">":
                depth -= 1
                if depth == 0:
                    return j
            elif tx == ">>":
                if depth <= 2:
                    return -j - 1  # closes here, by splitting
                depth -= 2
            elif tx == "&&":
                if self.t(j + 1) not in (">", ")", ",", "..."):
                    return None
            elif self.toks[j].kind in ("id", "num") or tx in ("::", ",", "*", "&", "...", "-", "."):
                pass
            else:
                return None
            j += 1
        return None

    def _match_templates(self):
        """Marks template brackets; a `>>` that closes two is split and the matching redone."""
        while True:
            split = None
            i = 0
            while i < len(self.toks) and split is None:
                if self.toks[i].text == "<" and self.toks[i].kind == "punct":
                    close = self._template_close(i)
                    if close is not None and close < 0:
                        split = -close - 1
                    elif close is not None:
                        self.template.update((i, close))
                        self.match[i], self.match[close] = close, i
                i += 1
            if split is None:
                return
            self._split_shift(split)

    def _scopes(self):
        """Names each token's enclosing function and marks the tokens not to mutate."""
        toks = self.toks
        scope = []  # (kind, name) of the open braces: ns, class, func, init, enum, block
        stmt_start = 0
        skip_until = -1
        func_skip = False
        i = 0
        while i < len(toks):
            tx = toks[i].text
            in_func = any(k in ("func", "init") for k, _ in scope)
            cur = next((n for k, n in reversed(scope) if k in ("func", "init")), "")
            self.func[i] = cur
            if i <= skip_until or func_skip or any(k == "enum" for k, _ in scope):
                self.skip[i] = True
            if tx in SKIP_PAREN_KEYWORDS and self.t(i + 1) == "(" and i + 1 in self.match:
                for j in range(i, self.match[i + 1] + 1):
                    self.skip[j] = True
            if tx in ("constexpr", "consteval", "constinit", "static_assert", "template", "case",
                      "concept", "requires"):
                # the rest of this statement (or the body it opens, for a function)
                j = i
                while j < len(toks) and toks[j].text not in (";", "{", ":") or (
                        toks[j].text == ":" and tx != "case" and j < len(toks)):
                    if toks[j].text == "(" and j in self.match:
                        j = self.match[j]
                    j += 1
                    if j < len(toks) and toks[j].text in (";", "{"):
                        break
                skip_until = max(skip_until, j)
            if tx == "{":
                kind, name = self._brace_kind(stmt_start, i, in_func)
                # a constexpr function's body, or a constexpr variable's initializer (a lambda
                # called at compile time): the schemata calls are not constant expressions
                if kind in ("func", "init") and any(toks[k].text in ("constexpr", "consteval")
                                          for k in range(stmt_start, i)):
                    kind = "cfunc"
                scope.append((kind, name))
                func_skip = any(k == "cfunc" for k, _ in scope)
                stmt_start = i + 1
            elif tx == "}":
                if scope:
                    scope.pop()
                func_skip = any(k == "cfunc" for k, _ in scope)
                stmt_start = i + 1
            elif tx == ";":
                stmt_start = i + 1
            i += 1

    def _brace_kind(self, start, brace, in_func) -> Tuple[str, str]:
        toks = self.toks
        if in_func:
            return "block", ""
        words = [toks[k].text for k in range(start, brace)]
        if "namespace" in words or "extern" in words and not any(w == "(" for w in words):
            return "ns", ""
        if "enum" in words:
            return "enum", ""
        # first top-level ( and = of the declaration
        k = start
        first_paren = first_eq = None
        while k < brace:
            tx = toks[k].text
            if tx == "(" and first_paren is None:
                first_paren = k
            if tx == "=" and first_eq is None:
                first_eq = k
            if (tx in ("(", "[") or k in self.template) and k in self.match and self.match[k] > k:
                k = self.match[k]
            k += 1
        if first_eq is not None and (first_paren is None or first_eq < first_paren):
            return "init", self._qualname(first_eq)
        if first_paren is None and ("class" in words or "struct" in words or "union" in words):
            name = next((w for w in reversed(words) if re.match(r"[A-Za-z_]\w*$", w)
                         and w not in ("final", "public", "private", "protected")), "")
            return "class", name
        if first_paren is not None:
            return "func", self._qualname(first_paren)
        return "block", ""

    def _qualname(self, k) -> str:
        parts, j = [], k - 1
        while j >= 0:
            tx = self.t(j)
            if j in self.template and tx == ">":
                j = self.match[j] - 1
                continue
            if self.toks[j].kind == "id" and parts and parts[-1] not in ("::", "~"):
                break  # the return type: `int f(` names f
            if self.toks[j].kind == "id" or tx == "::" or tx == "~" or tx == "operator":
                parts.append(tx)
                j -= 1
                continue
            break
        return "".join(reversed(parts)).lstrip(":")

    # ---- expressions -------------------------------------------------------------------------

    def is_operand_end(self, i) -> bool:
        tk = self.toks[i] if 0 <= i < len(self.toks) else None
        if not tk:
            return False
        if tk.kind in ("id", "num", "str"):
            return tk.text not in KEYWORDS_STOP and tk.text != "operator"
        return tk.text in (")", "]", "++", "--") or (tk.text == ">" and i in self.template) or \
            (tk.text == "}" and i in self.match and self.t(self.match[i] - 1) not in (")", "{", ";", "}", ""))

    def binary_prec(self, i) -> Optional[int]:
        """The precedence of the token at i when it is a binary operator there, else None."""
        tk = self.toks[i]
        if tk.kind != "punct" or tk.text not in PREC or i in self.template:
            return None
        if tk.text == "?":
            return PREC["?"]
        return PREC[tk.text] if self.is_operand_end(i - 1) else None

    def left_start(self, i, prec) -> Optional[int]:
        j = i - 1
        while j >= 0:
            tk = self.toks[j]
            tx = tk.text
            if tx in (")", "]") or (tx == ">" and j in self.template):
                if j not in self.match:
                    return None
                j = self.match[j] - 1
                continue
            if tx in OPEN or (tx == "<" and j in self.template) or tx in SEPARATORS or tx in KEYWORDS_STOP:
                break
            if tx in (")", "]", "}"):
                break
            p = self.binary_prec(j)
            if p is not None and (p < prec or tx == "?"):
                break
            j -= 1
        return j + 1 if j + 1 < i else None

    def right_end(self, i, prec) -> Optional[int]:
        j = i + 1
        n = len(self.toks)
        while j < n:
            tx = self.toks[j].text
            if tx in OPEN or (tx == "<" and j in self.template):
                if j not in self.match:
                    return None
                j = self.match[j] + 1
                continue
            if tx in (")", "]", "}") or (tx == ">" and j in self.template) or tx in SEPARATORS:
                break
            p = self.binary_prec(j)
            if p is not None and p <= prec and j > i + 1:
                break
            j += 1
        return j - 1 if j - 1 > i else None

    def snippet(self, a, b) -> str:
        return " ".join(self.toks[k].text for k in range(a, b + 1))


# ---- sites ---------------------------------------------------------------------------------------

REL_CALL = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
REL_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}


@dataclass
class Mutant:
    file: str
    func: str
    kind: str
    original: str
    replacement: str
    line: int
    col: int
    id: str = ""
    number: int = -1  # GDRPEER_MUTANT value (set by number_sites)


@dataclass
class Site:
    kind: str
    first: int  # span of tokens the rewrite wraps
    last: int
    prefix: str  # inserted before token `first` (@N@ stands for the base number)
    suffix: str  # inserted after token `last`
    replace: Dict[int, str] = field(default_factory=dict)  # token index -> new text
    mutants: List[Mutant] = field(default_factory=list)
    base: int = -1


def short(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip()
    if len(s) <= 72:
        return s
    return s[:56] + "…" + hashlib.sha1(s.encode()).hexdigest()[:8]


LAMBDA_OPEN = "[&]() -> bool { return static_cast<bool>("
LAMBDA_CLOSE = "); }"


def find_sites(rel: str, p: Parsed) -> List[Site]:
    toks, sites = p.toks, []

    def mk(kind, i, original, replacement):
        return Mutant(rel, p.func[i], kind, short(original), short(replacement), toks[i].line, toks[i].col)

    for i, tk in enumerate(toks):
        if p.skip[i] or not p.func[i] or tk.kind != "punct":
            continue
        tx = tk.text
        if tx in REL_CALL and i not in p.template and p.t(i - 1) != "operator":
            prec = PREC[tx]
            if p.binary_prec(i) is None:
                continue
            a, b = p.left_start(i, prec), p.right_end(i, prec)
            if a is None or b is None:
                continue
            orig = p.snippet(a, b)
            new = p.snippet(a, i - 1) + f" {REL_FLIP[tx]} " + p.snippet(i + 1, b)
            s = Site("rel" if tx not in ("==", "!=") else "eq", a, b,
                     f"::gdrpeer_mutant::{REL_CALL[tx]}(@N@, ", ")", {i: ", "})
            s.mutants.append(mk(s.kind, i, orig, new))
            sites.append(s)
        elif tx in ("&&", "||") and p.binary_prec(i) is not None:
            a, b = p.left_start(i, PREC[tx]), p.right_end(i, PREC[tx])
            if a is None or b is None:
                continue
            left, right = p.snippet(a, i - 1), p.snippet(i + 1, b)
            other = "||" if tx == "&&" else "&&"
            call = "land" if tx == "&&" else "lor"
            kind = "and" if tx == "&&" else "or"
            s = Site(kind, a, b, f"::gdrpeer_mutant::{call}(@N@, {LAMBDA_OPEN}",
                     f"{LAMBDA_CLOSE})", {i: f"{LAMBDA_CLOSE}, {LAMBDA_OPEN}"})
            orig = f"{left} {tx} {right}"
            s.mutants += [mk(kind, i, orig, f"{left} {other} {right}"),
                          mk(kind, i, orig, left), mk(kind, i, orig, right)]
            sites.append(s)
        elif tx == "(" and p.t(i - 1) == "if" and i in p.match:
            close = p.match[i]
            inner = range(i + 1, close)
            if close == i + 1 or any(toks[k].text in (";", "=") or toks[k].text in TYPEISH
                                     for k in inner):
                continue  # if constexpr / init-statement / declaration: left alone
            if p.t(i - 1) == "if" and p.t(i - 2) == "constexpr":
                continue
            # has an else? the statement after the condition, then `else`
            after = close + 1
            if p.t(after) == "{" and after in p.match:
                end = p.match[after]
            else:
                end = after
                while end < len(toks) and toks[end].text != ";":
                    if toks[end].text in OPEN and end in p.match:
                        end = p.match[end]
                    end += 1
            has_else = p.t(end + 1) == "else"
            c = p.snippet(i + 1, close - 1)
            count = 3 if has_else else 2
            s = Site("if", i + 1, close - 1, f"::gdrpeer_mutant::cond<{count}>(@N@, {LAMBDA_OPEN}",
                     f"{LAMBDA_CLOSE})")
            s.mutants += [mk("if", i, f"if ({c})", "if (true)"), mk("if", i, f"if ({c})", "if (false)")]
            if has_else:
                s.mutants.append(mk("if", i, f"if ({c}) A else B", f"if ({c}) B else A"))
            sites.append(s)
        elif tx == "?" and i not in p.template:
            a = p.left_start(i, PREC["?"] + 1)
            if a is None:
                continue
            c = p.snippet(a, i - 1)
            s = Site("tern", a, i - 1, f"::gdrpeer_mutant::tern(@N@, {LAMBDA_OPEN}", f"{LAMBDA_CLOSE})")
            s.mutants.append(mk("tern", i, f"{c} ? x : y", f"{c} ? y : x"))
            sites.append(s)
        elif tx == "!" and not p.is_operand_end(i - 1) and p.t(i + 1) != "=":
            if p.t(i - 1) in ("!", "-", "+", "~", "*", "&") or p.t(i + 1) == "!":
                continue  # Not{}* would bind to the wrong side there
            b = i + 1
            # the operand, for the id only: a postfix expression
            while b + 1 < len(toks) and (toks[b + 1].text in ("(", "[", ".", "->", "::") or
                                         toks[b].text in (".", "->", "::")):
                if toks[b + 1].text in OPEN and b + 1 in p.match:
                    b = p.match[b + 1]
                else:
                    b += 1
            x = p.snippet(i + 1, min(b, len(toks) - 1))
            s = Site("not", i, i, "", "", {i: "::gdrpeer_mutant::Not{@N@} * "})
            s.mutants.append(mk("not", i, "!" + x, x))
            sites.append(s)
    # integer literals in bounds and comparisons
    for i, tk in enumerate(toks):
        if p.skip[i] or not p.func[i] or tk.kind != "num" or not re.match(r"^(0[xX])?[\da-fA-F']+[uUlLzZ]*$", tk.text):
            continue
        if re.search(r"[.eE]", tk.text) and not tk.text.lower().startswith("0x"):
            continue
        if i in p.template or p.t(i - 1) in ("<", ">") and (i - 1) in p.template:
            continue
        prv, nxt = p.t(i - 1), p.t(i + 1)
        near = lambda k: k in REL_CALL and (k not in ("<", ">")) or k in ("+", "-")
        cmp_prev = prv in REL_CALL and (i - 1) not in p.template and p.binary_prec(i - 1) is not None
        cmp_next = nxt in REL_CALL and (i + 1) not in p.template and p.binary_prec(i + 1) is not None
        arith_prev = prv in ("+", "-") and p.binary_prec(i - 1) is not None
        arith_next = nxt in ("+", "-") and p.binary_prec(i + 1) is not None
        subscript = prv == "[" and nxt == "]" and p.is_operand_end(i - 2)
        if not (cmp_prev or cmp_next or arith_prev or arith_next or subscript):
            continue
        if prv == "-" and not p.is_operand_end(i - 2):
            continue  # a negative literal: the - is unary
        n = tk.text
        s = Site("lit", i, i, "::gdrpeer_mutant::lit(@N@, ", ")")
        s.mutants += [mk("lit", i, f"{n}", f"{n} + 1"), mk("lit", i, f"{n}", f"{n} - 1")]
        # say where: the comparison or sum around it
        lo, hi = max(i - 2, 0), min(i + 2, len(toks) - 1)
        for m in s.mutants:
            m.original = short(f"{p.snippet(lo, i - 1)} «{n}» {p.snippet(i + 1, hi)}")
            m.replacement = short(f"{p.snippet(lo, i - 1)} «{m.replacement}» {p.snippet(i + 1, hi)}")
        sites.append(s)
    return laminar(sites)


def laminar(sites: List[Site]) -> List[Site]:
    """Drops sites whose span partly overlaps an earlier one (a misread expression)."""
    kept = []
    for s in sorted(sites, key=lambda s: (s.first, -s.last)):
        if all(s.last < k.first or s.first > k.last or (k.first <= s.first and s.last <= k.last)
               or (s.first <= k.first and k.last <= s.last) for k in kept):
            kept.append(s)
    return kept


def assign_ids(mutants: List[Mutant]):
    seen: Dict[str, int] = {}
    for m in mutants:
        base = f"{Path(m.file).name}|{m.func}|{m.kind}|{m.original} -> {m.replacement}"
        seen[base] = seen.get(base, 0) + 1
        m.id = base if seen[base] == 1 else f"{base} #{seen[base]}"


def sites_of(repo: Path, rel: str) -> Tuple[Parsed, List[Site]]:
    p = Parsed((repo / rel).read_text())
    return p, find_sites(rel, p)


def number_sites(per_file: List[Tuple[str, Parsed, List[Site]]], start: int = 1) -> List[Mutant]:
    """Gives each site its base number and each mutant its GDRPEER_MUTANT value."""
    n, allm = start, []
    for rel, p, sites in per_file:
        for s in sorted(sites, key=lambda s: (s.first, s.last, s.kind)):
            s.base = n
            for k, m in enumerate(s.mutants):
                m.number = n + k
            n += len(s.mutants)
            allm += s.mutants
    assign_ids(allm)
    return allm


def rewrite(p: Parsed, sites: List[Site]) -> str:
    """The file with every site turned into its schemata call; same lines as the original."""
    before: Dict[int, List[Site]] = {}
    after: Dict[int, List[Site]] = {}
    repl: Dict[int, str] = {}
    for s in sites:
        if s.prefix:
            before.setdefault(s.first, []).append(s)
        if s.suffix:
            after.setdefault(s.last, []).append(s)
        for k, v in s.replace.items():
            repl[k] = v.replace("@N@", str(s.base))
    out, pos = [], 0
    for i, tk in enumerate(p.toks):
        out.append(p.text[pos:tk.start])
        # one span wrapped twice (if (a && b)): the pure wrapper (if, ?:, literal) goes outside,
        # the operator whose token is replaced inside, so each lambda holds whole operands
        for s in sorted(before.get(i, []), key=lambda s: (-s.last, bool(s.replace), s.base)):
            out.append(s.prefix.replace("@N@", str(s.base)))
        out.append(repl.get(i, tk.text))
        for s in sorted(after.get(i, []), key=lambda s: (-s.first, not s.replace, -s.base)):
            out.append(s.suffix)
        pos = tk.end
    out.append(p.text[pos:])
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true", help="print every mutant: number, where, id")
    ap.add_argument("--rewrite", metavar="FILE", help="print FILE rewritten (to check the rewrite)")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or source_files()
    per_file = []
    for rel in files:
        p, sites = sites_of(REPO, rel)
        per_file.append((rel, p, sites))
    allm = number_sites(per_file)
    if args.rewrite:
        for rel, p, sites in per_file:
            if rel == args.rewrite:
                sys.stdout.write(rewrite(p, sites))
        return 0
    for m in allm:
        print(f"{m.number:5} {m.file}:{m.line}:{m.col}  {m.id}")
    counts: Dict[str, int] = {}
    for m in allm:
        counts[m.kind] = counts.get(m.kind, 0) + 1
    print(f"{len(allm)} mutants in {len(files)} files: " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
