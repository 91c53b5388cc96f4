"""The documentation stays true: README.md and every docs/*.md page.

* Every ``$ mmcli …`` example in a ``console`` block is run from the repository root and its
  output (stdout, then stderr) must equal the documented lines, one for one, table rows
  included. Only timing figures are masked, each at a known position (see ``normalise``), and
  the process id in a captured dump's name. An example followed by ``$ echo $?`` must exit
  with the code shown; any other must exit 0 or 1.
* A console block with a ``$ python …`` line (a script that writes files the next commands
  read) is a session: its commands run in order in a fresh directory that links the
  repository's top-level entries, so what they write never lands in the repository.
* Every ``python`` block runs. A command shown without output (an ``sh`` block, no ``$``
  prompt: one that needs a machine or files the suite does not have) must at least parse.
* Every registered command has a docs page with a heading naming it and an example under it.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^```(\S*)[ \t]*(\S*)\n(.*?)^```$", flags=re.S | re.M)
HEADING = re.compile(r"^(#{1,6}) (.+)$", flags=re.M)
PROMPT = "$ "
ECHO_STATUS = "echo $?"


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Example:
    """One ``$ mmcli …`` line of a console block and the output documented under it."""

    page: str
    line: int
    heading: str
    command: str
    output: tuple[str, ...]
    exit_code: int | None  # from a following ``$ echo $?``, when there is one
    session: str | None = None  # "page:line" of its block when the block runs as a session

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line} {self.command.removeprefix('mmcli ')}"[:90]


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # line of the opening fence
    lang: str
    source: str  # a file the block quotes: ```toml samples/kv/toy.toml
    text: str
    heading: str


def headings(text: str) -> list[re.Match[str]]:
    """The page's headings, not counting ``#`` lines inside fenced blocks (comments)."""
    fenced = [m.span() for m in FENCE.finditer(text)]
    return [m for m in HEADING.finditer(text) if not any(a <= m.start() < b for a, b in fenced)]


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    titles = [(m.start(), m.group(2)) for m in headings(text)]
    for m in FENCE.finditer(text):
        heading = next((h for pos, h in reversed(titles) if pos < m.start()), "")
        line = text.count("\n", 0, m.start()) + 1
        yield Block(rel(page), line, m.group(1), m.group(2), m.group(3), heading)


def parse_console(block: Block) -> list[Example]:
    """Split a console block into examples: a ``$`` line, then its output up to the next one."""
    examples: list[Example] = []
    current: tuple[int, str, list[str]] | None = None

    def close(exit_code: int | None = None) -> None:
        nonlocal current
        if current is not None:
            number, command, output = current
            examples.append(
                Example(block.page, number, block.heading, command, tuple(output), exit_code)
            )
        current = None

    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        number = block.line + 1 + i
        if line.startswith(PROMPT) and line[len(PROMPT) :] == ECHO_STATUS:
            assert current is not None, f"{block.page}:{number}: `$ echo $?` follows no command"
            assert i + 1 < len(lines) and lines[i + 1].isdigit(), (
                f"{block.page}:{number}: `$ echo $?` must be followed by the exit code"
            )
            close(int(lines[i + 1]))
            i += 2
            continue
        if line.startswith(PROMPT):
            close()
            current = (number, line[len(PROMPT) :], [])
        else:
            assert current is not None, f"{block.page}:{number}: output before any `$` line"
            current[2].append(line)
        i += 1
    close()
    if any(e.argv[0] == "python" for e in examples):
        examples = [replace(e, session=f"{block.page}:{block.line}") for e in examples]
    return examples


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def all_examples() -> list[Example]:
    return [e for b in all_blocks() if b.lang == "console" for e in parse_console(b)]


EXAMPLES = all_examples()
#: Each session's examples, in the order they run.
SESSIONS: dict[str, list[Example]] = {}
for _example in EXAMPLES:
    if _example.session is not None:
        SESSIONS.setdefault(_example.session, []).append(_example)
PYTHON_BLOCKS = [b for b in all_blocks() if b.lang == "python"]


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    returncode: int
    lines: tuple[str, ...]  # stdout, then stderr
    stderr: str


def execute(command: str, cwd: Path = ROOT) -> Run:
    """Run a documented command the way a reader would, from the repository root (a session:
    its directory); ``python`` is the interpreter running the suite, mmcli's environment."""
    argv = shlex.split(command)
    assert argv[0] in ("mmcli", "python"), f"an example must start with mmcli or python: {command}"
    assert not {"|", ">", ">>", "<", "&&", ";", "2>&1"} & set(argv), f"no shell syntax: {command}"
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    for name in ("MMCLI_DEBUG", "FORCE_COLOR"):
        env.pop(name, None)
    program = [sys.executable] if argv[0] == "python" else [sys.executable, "-m", "mmcli"]
    proc = subprocess.run(
        [*program, *argv[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Run(proc.returncode, tuple((proc.stdout + proc.stderr).splitlines()), proc.stderr)


def execute_session(commands: list[str]) -> list[Run]:
    """Run a session's commands in order in a fresh directory linking the repository's
    top-level entries: ``samples/…`` and ``examples/…`` resolve, and what is written is
    thrown away."""
    with tempfile.TemporaryDirectory(prefix="mmcli-docs-") as tmp:
        for entry in ROOT.iterdir():
            if not entry.name.startswith("."):
                (Path(tmp) / entry.name).symlink_to(entry)
        return [execute(command, cwd=Path(tmp)) for command in commands]


# Each distinct command (and each session) runs once; the examples selected for a pytest run
# are started together, as many at a time as there are CPUs (their timings are masked, so
# sharing them is harmless).
_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
_RUNS: dict[str, Future[Run]] = {}
_SESSION_RUNS: dict[str, Future[list[Run]]] = {}


def start(example: Example) -> None:
    if example.session is not None:
        if example.session not in _SESSION_RUNS:
            commands = [e.command for e in SESSIONS[example.session]]
            _SESSION_RUNS[example.session] = _POOL.submit(execute_session, commands)
    elif example.command not in _RUNS:
        _RUNS[example.command] = _POOL.submit(execute, example.command)


def run(example: Example) -> Run:
    start(example)
    if example.session is None:
        return _RUNS[example.command].result()
    runs = _SESSION_RUNS[example.session].result()
    return runs[SESSIONS[example.session].index(example)]


@pytest.fixture(scope="module", autouse=True)
def _start_selected_examples(request: pytest.FixtureRequest) -> Iterator[None]:
    selected = [
        item.callspec.params["example"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and hasattr(item, "callspec")
        and isinstance(item.callspec.params.get("example"), Example)
    ]
    for example in sorted(selected, key=lambda e: e.argv[1] != "bench"):  # longest first
        start(example)
    yield
    _POOL.shutdown(cancel_futures=True)


# --- masking: timing figures only, each at a known position -------------------------------
#
# Each pattern matches one kind of line whole and names the figures it masks: groups named
# ``t…`` are timings (or figures computed from timings); the rest of the line is compared as
# is. No other line is touched, so a kv-share or inspect table is compared cell for cell.

MASK = "#"
FIG = r"(?:\d[\d,]*(?:\.\d+)?|–)"  # a figure as a table prints it: 1,234 / 0.12 / –
JSON_NUM = r"(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|null)"

# check-embeddings: "  timings on cpu: load 1.5 ms  check 1.6 ms  scatter 0.0 ms  gather 0.0 ms"
CHECK_TIMINGS = re.compile(
    r"^  timings on \S+: load (?P<t1>\d+\.\d) ms  check (?P<t2>\d+\.\d) ms  "
    r"scatter (?P<t3>\d+\.\d) ms  gather (?P<t4>\d+\.\d) ms$"
)
# check-embeddings --format json: the four entries of each "timings_ms" object.
CHECK_JSON_TIMINGS_START = re.compile(r'^\s*"timings_ms": \{$')
CHECK_JSON_TIMING = re.compile(rf'^\s*"(?:load|check|scatter|gather)": (?P<t>{JSON_NUM}),?$')

# bench table row: op, impl, layout, rows, then time µs, IQR µs, GB/s, of copy, speedup (all
# timings), then on CUDA the syncs column (a count: kept). Column widths follow the timings,
# so the header, the rule and the rows are compared with their runs of spaces collapsed.
BENCH_ROW = re.compile(
    rf"^(?:scatter|gather) +(?:reference|fast) +(?:item \d+|[a-z]+) +\d+→\d+ +"
    rf"(?P<t1>{FIG}) +(?P<t2>{FIG}) +(?P<t3>{FIG}) +(?P<t4>{FIG})% +(?P<t5>{FIG})×"
    r"(?: +(?:\d+|–))?$"
)
BENCH_HEADER = re.compile(
    r"^op +impl +layout +rows +time µs +IQR µs +GB/s +of copy +speedup(?: +syncs)?$"
)
BENCH_RULE = re.compile(r"^(?P<t>─+)$")
BENCH_SUMMARY = re.compile(
    rf"^[a-z]+ (?:scatter|gather): (?P<t1>{FIG})× the reference's speed, (?P<t2>{FIG})× a "
    r"copy's time \(geometric means, \d+ cases?\)$"
)
BENCH_JSON_TIMING = re.compile(
    r'^\s*"(?:median_us|iqr_us|gbps|copy_fraction|speedup_vs_reference|copy_us|'
    rf'geomean_speedup_vs_reference|geomean_time_vs_copy|geomean_copy_fraction)": (?P<t>{JSON_NUM})'
    r",?$"
)
# Not a timing, but the environment's: the torch build the suite runs on (TORCH_SPEC).
BENCH_TORCH = re.compile(
    r"^(?:mmcli bench · .* · torch (?P<t>\S+) · \d+ threads?"
    r'|\s*"torch_version": "(?P<t2>[^"]*)",?)$'
)
# Whether a timing's spread is reported as noisy depends on the machine's load at the time:
# these lines (on stderr, and in the JSON "warnings" list) are dropped before comparing.
BENCH_NOISE = re.compile(
    r'^(?:warning: |\s*")[^"]+: IQR \d+% of the median '
    r'\(a busy machine\? rerun, or raise --min-time\)(?:",?)?$'
)

SPACED = (BENCH_ROW, BENCH_HEADER, BENCH_RULE)

# Not a timing either: the process id in a captured dump's name (``mmcli.capture``'s
# ``{engine}-{phase}-r{rank}-p{pid}-{seq:04d}-{reason}.safetensors``), wherever it is printed.
CAPTURE_PID = re.compile(r"(\b[\w.]+-[\w.]+-r(?:\d+|x)-p)\d+(-\d{4}-[a-z-]+\.safetensors)")


def masked(m: re.Match[str]) -> str:
    """The matched line with each named group (a timing figure) replaced by MASK."""
    spans = sorted(m.span(g) for g in m.groupdict() if m.group(g) is not None)
    line, pos, parts = m.string, 0, []
    for begin, end in spans:
        parts += [line[pos:begin], MASK]
        pos = end
    parts.append(line[pos:])
    result = "".join(parts)
    return " ".join(result.split()) if m.re in SPACED else result


def _mask_check_embeddings(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_timings = False
    for line in lines:
        if m := CHECK_TIMINGS.match(line):
            line = masked(m)
        elif CHECK_JSON_TIMINGS_START.match(line):
            in_timings = True
        elif in_timings and (m := CHECK_JSON_TIMING.match(line)):
            line = masked(m)
        else:
            in_timings = False
        out.append(line)
    return out


def _mask_bench(lines: list[str]) -> list[str]:
    out: list[str] = []
    patterns = (BENCH_ROW, BENCH_HEADER, BENCH_RULE, BENCH_SUMMARY, BENCH_JSON_TIMING, BENCH_TORCH)
    for line in lines:
        if BENCH_NOISE.match(line):
            continue
        m = next((m for p in patterns if (m := p.match(line))), None)
        if m is not None:
            line = masked(m)
        # A JSON list whose every entry was a dropped noise line: "[" then "]" → "[]".
        if out and out[-1].endswith("[") and line.strip() in ("]", "],"):
            out[-1] += line.strip()
            continue
        out.append(line)
    return out


def normalise(command: str, lines: tuple[str, ...] | list[str]) -> list[str]:
    """The lines to compare: trailing spaces and outer blank lines removed, timings masked."""
    result = [CAPTURE_PID.sub(rf"\g<1>{MASK}\g<2>", line.rstrip()) for line in lines]
    argv = shlex.split(command)
    if argv[1:2] == ["check-embeddings"]:
        result = _mask_check_embeddings(result)
    elif argv[1:2] == ["bench"]:
        result = _mask_bench(result)
    while result and not result[-1]:
        result.pop()
    while result and not result[0]:
        result.pop(0)
    return result


def mismatch(command: str, documented: tuple[str, ...], actual: tuple[str, ...]) -> str | None:
    """A diff of the documented against the actual output, or None when they agree."""
    expected, got = normalise(command, documented), normalise(command, actual)
    if expected == got:
        return None
    diff = difflib.unified_diff(expected, got, "documented", "actual", lineterm="", n=1)
    return "\n".join(diff)


# --- the examples -------------------------------------------------------------------------


def _params() -> list[object]:
    return [
        pytest.param(e, id=e.id, marks=[pytest.mark.slow] if e.argv[1] == "bench" else [])
        for e in EXAMPLES
    ]


@pytest.mark.parametrize("example", _params())
def test_console_example(example: Example) -> None:
    if example.argv[1] == "bench":
        # The timed suite takes minutes; documented bench runs are the quick form.
        assert "--quick" in example.argv, f"{example.id}: show bench in its --quick form"
    result = run(example)
    if example.exit_code is None:
        assert result.returncode in (0, 1), (
            f"{example.id}: exit {result.returncode} (document it with `$ echo $?`)\n"
            f"{result.stderr}"
        )
    else:
        assert result.returncode == example.exit_code, f"{example.id}\n{result.stderr}"
    diff = mismatch(example.command, example.output, result.lines)
    assert diff is None, f"{example.page}:{example.line}: `$ {example.command}`\n{diff}"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: f"{b.page}:{b.line}")
def test_python_example(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(block.text, f"{block.page}:{block.line}", "exec"), {})  # noqa: S102


def test_every_example_is_in_a_console_block() -> None:
    """A `$ mmcli` line outside a console block would never run: keep them all in one."""
    hidden = [
        f"{b.page}:{b.line} ({b.lang or 'no language'})"
        for b in all_blocks()
        if b.lang != "console" and re.search(r"^\$ ", b.text, flags=re.M)
    ]
    assert not hidden, f"console examples outside ```console blocks: {hidden}"
    assert EXAMPLES, "no console examples found"


def parse(argv: list[str]) -> None:
    """Parse ``mmcli …`` arguments with the app's own parser, running nothing."""
    import typer.main

    from mmcli.cli.main import app

    command = typer.main.get_command(app)
    path, words = ["mmcli"], list(argv[1:])
    while words and words[0] in getattr(command, "commands", {}):
        path.append(words.pop(0))
        command = command.commands[path[-1]]  # type: ignore[attr-defined]
    assert not getattr(command, "commands", None), f"`{shlex.join(argv)}` names no command"
    with command.make_context(" ".join(path), words):
        pass


def test_shell_commands_parse() -> None:
    """``mmcli`` lines of sh blocks (shown, not run) use options the commands have."""
    for block in all_blocks():
        if block.lang not in ("sh", "shell", "bash"):
            continue
        for line in block.text.splitlines():
            command = line.split(" #")[0].strip()
            if command.startswith("mmcli "):
                try:
                    parse(shlex.split(command))
                except Exception as exc:  # click's usage errors, or the assertion above
                    pytest.fail(f"{block.page}:{block.line}: `{command}`: {exc}")


def test_quoted_files_are_quoted_whole() -> None:
    """A block naming a file after its language (```toml samples/kv/toy.toml) is that file."""
    quoted = [b for b in all_blocks() if b.source]
    for block in quoted:
        actual = (ROOT / block.source).read_text(encoding="utf-8")
        assert block.text == actual, f"{block.page}:{block.line} differs from {block.source}"


def anchor(heading: str) -> str:
    """The fragment a heading gets on the rendered page (GitHub's rule)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_pages_resolve() -> None:
    link = re.compile(r"\]\(([^)\s]+)\)")
    broken = []
    for page in PAGES:
        for target in link.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            path, _, fragment = target.partition("#")
            file = (page.parent / path) if path else page
            if not file.exists():
                broken.append(f"{rel(page)} → {target}")
            elif fragment and file.suffix == ".md":
                titles = headings(file.read_text(encoding="utf-8"))
                if fragment not in {anchor(m.group(2)) for m in titles}:
                    broken.append(f"{rel(page)} → {target} (no such heading)")
    assert not broken, broken
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in index]
    assert not unlisted, f"docs/README.md does not link {unlisted}"


def test_readme_is_a_front_door() -> None:
    """The README stays a short tour of about 12 KB; the manual lives in docs/. (11 KiB
    until it showed one model in three engines side by side, issue 24.)"""
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 12 * 1024 + 256, f"README.md is {size} bytes; move detail to docs/"


# --- the comparison is strict -------------------------------------------------------------


def _documented(command: str) -> Example:
    found = [e for e in EXAMPLES if e.command == command and e.page.startswith("docs/")]
    assert found, f"no documented example of `{command}`"
    return found[0]


def test_one_changed_table_cell_is_a_mismatch() -> None:
    """Change "→ 18" to "→ 17" in one kv-share layer row of a copy: the comparison fails."""
    example = _documented("mmcli kv-share plan samples/kv/gemma3n-e2b-like.json --memory 20GiB")
    actual = run(example).lines
    assert mismatch(example.command, example.output, actual) is None
    rows = [i for i, line in enumerate(example.output) if "│ → 18 " in line]
    assert len(rows) == 1, "the example has one layer row sharing with layer 18"
    changed = list(example.output)
    changed[rows[0]] = changed[rows[0]].replace("→ 18", "→ 17")
    diff = mismatch(example.command, tuple(changed), actual)
    assert diff is not None and "→ 17" in diff and "→ 18" in diff


def test_masks_cover_timings_and_nothing_else() -> None:
    """Any timing figure may change; any other cell of the same lines may not."""
    bench = _documented("mmcli bench --device cpu --quick --layout contiguous,interleaved")
    check = _documented("mmcli check-embeddings samples/dumps --device cpu")

    def same(command: str, a: list[str], b: list[str]) -> bool:
        return normalise(command, a) == normalise(command, b)

    rows = [s for s in bench.output if BENCH_ROW.match(s)]
    assert len(rows) == 16, "contiguous and interleaved, 2 sizes, 2 ops, 2 implementations"
    retimed = [" ".join(s.split()[:4] + ["19,876", "1.2", "0.01", "100%", "12.34×"]) for s in rows]
    assert same(bench.command, retimed, rows)
    for old, new in (("576→552", "576→551"), ("reference", "fast"), ("interleaved", "random")):
        row = next(s for s in rows if old in s)
        assert not same(bench.command, [row.replace(old, new, 1)], [row]), (old, new)
    summaries = [s for s in bench.output if BENCH_SUMMARY.match(s)]
    assert len(summaries) == 2
    for line in summaries:
        assert same(bench.command, [re.sub(r"[\d.]+×", "12.34×", line)], [line])
        assert not same(bench.command, [line.replace("speed", "time")], [line])

    timings = [s for s in check.output if CHECK_TIMINGS.match(s)]
    assert len(timings) == 6, "one per sample dump"
    for line in timings:
        assert same(check.command, [re.sub(r"\d+\.\d+ ms", "98.7 ms", line)], [line])
        assert not same(check.command, [line.replace("cpu", "cuda")], [line])
    rows = [s for s in check.output if re.match(r"^ +\d+ +\[\d", s)]
    assert len(rows) == 17, "one per item"
    for row in rows:
        assert normalise(check.command, [row]) == [row.rstrip()]
        assert not same(check.command, [row.replace("bfloat16", "float16")], [row])


def test_capture_pid_is_masked_and_nothing_else() -> None:
    """A captured dump's process id may change; its engine, phase, rank, seq and reason not."""
    line = "dumps/transformers-prefill-rx-p6462-0000-failure.safetensors  failed"

    def same(a: str) -> bool:
        command = "mmcli check-embeddings dumps/"
        return normalise(command, [a]) == normalise(command, [line])

    assert normalise("python x.py", [line]) == [line.replace("p6462", f"p{MASK}")]
    assert same(line.replace("p6462", "p17"))
    for old, new in (("prefill", "decode"), ("-rx-", "-r0-"), ("0000", "0001"), ("ure", "ed")):
        assert not same(line.replace(old, new)), (old, new)


# --- every command is documented ----------------------------------------------------------


def registered_commands() -> list[str]:
    """Every runnable command path of the app (``kv-share plan``, …), from the app itself."""
    import typer.main

    from mmcli.cli.main import app

    def walk(command: object, path: list[str]) -> Iterator[str]:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in sorted(subcommands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path)

    return list(walk(typer.main.get_command(app), []))


COMMANDS = registered_commands()


def test_commands_are_discovered() -> None:
    assert {"check-embeddings", "inspect", "kv-share plan", "bench"} <= set(COMMANDS)


def sections_naming(command: str) -> list[tuple[str, int, int]]:
    """(page, first line, last line) of each docs section whose heading names `mmcli COMMAND`;
    a section runs to the next heading of the same or a higher level."""
    name = re.compile(rf"\bmmcli {re.escape(command)}(?![\w-])")
    found = []
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "README.md":
            continue
        text = page.read_text(encoding="utf-8")
        titles = headings(text)
        for i, m in enumerate(titles):
            if name.search(m.group(2)):
                level = len(m.group(1))
                end = next((n.start() for n in titles[i + 1 :] if len(n.group(1)) <= level), None)
                first = text.count("\n", 0, m.start()) + 1
                last = text.count("\n", 0, end) if end is not None else text.count("\n") + 1
                found.append((rel(page), first, last))
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_command_has_a_docs_page(command: str) -> None:
    """A docs page has a heading naming `mmcli COMMAND`, and that section shows an example of
    it (which test_console_example runs) whose options and arguments the command accepts."""
    sections = sections_naming(command)
    assert sections, f"no docs page has a heading naming `mmcli {command}`"
    words = command.split()
    examples = [
        e
        for page, first, last in sections
        for e in EXAMPLES
        if e.page == page and first < e.line <= last and e.argv[1 : 1 + len(words)] == words
    ]
    assert examples, f"no example of `mmcli {command}` in its sections: {sections}"
    for example in examples:
        parse(example.argv)  # the options and arguments shown are the command's own


# --- every option is documented, and no page says an accepted option is refused ----------


def command_options() -> dict[str, list[str]]:
    """Each registered command's long options (``--x`` and its ``--no-x``), from the app."""
    import typer.main

    from mmcli.cli.main import app

    def walk(command: object, path: list[str]) -> Iterator[tuple[str, object]]:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in sorted(subcommands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), command

    found: dict[str, list[str]] = {}
    for name, command in walk(typer.main.get_command(app), []):
        params = getattr(command, "params", [])
        found[name] = sorted(
            {
                opt
                for p in params
                if p.param_type_name == "option"
                for opt in [*p.opts, *p.secondary_opts]
                if opt.startswith("--") and opt != "--help"
            }
        )
    return found


OPTIONS = command_options()


def pages_of(command: str) -> list[Path]:
    return sorted({ROOT / page for page, _, _ in sections_naming(command)})


def mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_every_option_is_on_the_commands_page(command: str) -> None:
    pages = pages_of(command)
    assert pages, f"no docs page has a heading naming `mmcli {command}`"
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    missing = [opt for opt in OPTIONS[command] if not mentions(text, opt)]
    where = ", ".join(rel(p) for p in pages)
    assert not missing, f"`mmcli {command}` accepts {missing}, which {where} never mentions"


#: A sentence that says something is refused or not modelled: one clause of a line, a
#: bullet or a table cell, ended by a full stop, a semicolon, a cell border or a line break.
REFUSAL = re.compile(r"\b(?:refused|not modelled|not supported)\b", flags=re.I)
CLAUSE = re.compile(r"(?:[^.;|\n]|\.(?=\w))+(?:\.|;|\||\n|$)")

#: Each page's sentences that say an option is refused, with a command line that shows the
#: refusal (run below: it must exit 2). A new such sentence fails until it is listed here with
#: its demonstration -- or, if the CLI accepts the option after all, the page is corrected.
REFUSALS: dict[tuple[str, str], list[str]] = {
    ("docs/kv-share-vllm.md", "--gpu"): [
        "kv-share",
        "plan",
        "samples/kv/qwen3-14b-like.json",
        "--gpu",
        "H100",
        "--weights",
        "28GiB",
        "--vllm-version",
        "0.9.2",
    ],
    ("docs/kv-share-vllm.md", "--vllm-version"): [
        "kv-share",
        "plan",
        "samples/kv/qwen3-14b-like.json",
        "--gpu",
        "H100",
        "--weights",
        "28GiB",
        "--vllm-version",
        "0.9.2",
    ],
    ("docs/kv-share-engines.md", "--trtllm-version"): [
        "kv-share",
        "plan",
        "samples/kv/qwen1.5-7b.json",
        "--engine",
        "trtllm",
        "--trtllm-version",
        "1.2.1",
        "--memory",
        "20GiB",
    ],
    ("docs/kv-share.md", "--enable-prefix-caching"): [
        "kv-share",
        "plan",
        "tests/kv/configs/nvidia--Nemotron-H-8B-Base-8K.json",
        "--vllm-version",
        "0.28",
        "--enable-prefix-caching",
    ],
    ("docs/kv-share-vllm.md", "--max-model-len"): [
        "kv-share",
        "plan",
        "samples/kv/qwen3-14b-like.json",
        "--max-model-len",
        "1000000",
    ],
    ("docs/kv-share.md", "--block-size"): [
        "kv-share",
        "plan",
        "tests/kv/configs/nvidia--Nemotron-H-8B-Base-8K.json",
        "--block-size",
        "24",
    ],
    ("docs/kv-share.md", "--no-chunked-local-attn-hybrid"): [
        "kv-share",
        "plan",
        "samples/kv/chunked-local.toml",
        "--vllm-version",
        "0.10.0",
        "--no-chunked-local-attn-hybrid",
    ],
    ("docs/kv-share.md", "--pipeline-parallel-size"): [
        "kv-share",
        "plan",
        "samples/kv/qwen3-14b-like.json",
        "--vllm-version",
        "0.10",
        "--pipeline-parallel-size",
        "2",
    ],
    ("docs/kv-share.md", "--vllm-version"): [
        "kv-share",
        "plan",
        "tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json",
        "--vllm-version",
        "0.10",
    ],
    ("docs/kv-share-engines.md", "--gpu"): [
        "kv-share",
        "plan",
        "tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json",
        "--engine",
        "sglang",
        "--sglang-version",
        "0.5.4",
        "-tp",
        "8",
        "--gpu",
        "H100",
        "--weights",
        "16GiB",
    ],
    ("docs/kv-share.md", "--engine"): [
        "kv-share",
        "plan",
        "tests/kv/configs/deepseek-ai--DeepSeek-V3.2.as-DeepSeek-V3.2-Exp.json",
        "--engine",
        "sglang",
    ],
    ("docs/kv-configs.md", "--vllm-version"): [
        "kv-share",
        "plan",
        "samples/kv/hunyuan-cla2-like.json",
        "--vllm-version",
        "0.28",
    ],
    ("docs/kv-share.md", "--weights"): [
        "kv-share",
        "plan",
        "samples/kv/qwen3-14b-like.json",
        "--gpu",
        "H100",
        "--weights",
        "70B",
    ],
}


def prose(text: str) -> str:
    """The page without code blocks, one line per paragraph, bullet or table row (Markdown
    wraps a sentence over several lines)."""
    text = FENCE.sub("", text)
    lines: list[str] = []
    for line in text.splitlines():
        starts = not line.strip() or re.match(r"\s*(?:[|*#>-]|\d+\.)\s", line + " ")
        if lines and not starts and lines[-1].strip() and not lines[-1].lstrip().startswith("|"):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return "\n".join(lines)


def refusal_claims() -> list[tuple[str, str, str]]:
    """(page, option, sentence) for each sentence naming a command's option as refused."""
    every = {opt for opts in OPTIONS.values() for opt in opts}
    claims = []
    for page in PAGES:
        text = prose(page.read_text(encoding="utf-8"))
        for clause in CLAUSE.findall(text):
            if REFUSAL.search(clause):
                for opt in sorted(every):
                    if mentions(clause, opt):
                        claims.append((rel(page), opt, clause.strip()))
    return claims


def test_no_page_says_an_accepted_option_is_refused() -> None:
    unlisted = [c for c in refusal_claims() if (c[0], c[1]) not in REFUSALS]
    assert not unlisted, (
        "a page says an option is refused or not modelled; show it (REFUSALS) or fix the page: "
        + "; ".join(f"{page}: {opt}: {text!r}" for page, opt, text in unlisted)
    )


@pytest.mark.parametrize("claim", sorted(REFUSALS), ids=lambda c: f"{c[0]} {c[1]}")
def test_each_documented_refusal_is_one(claim: tuple[str, str]) -> None:
    argv = REFUSALS[claim]
    assert claim[1] in argv
    assert any(c[:2] == claim for c in refusal_claims()), f"{claim}: the page no longer says so"
    result = subprocess.run(
        [sys.executable, "-m", "mmcli", *argv], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: "), result.stderr


def test_a_refusal_of_an_accepted_option_is_caught() -> None:
    text = "Not modelled at all: pipeline parallelism (`--pipeline-parallel-size` above 1)."
    assert any(
        REFUSAL.search(c) and mentions(c, "--pipeline-parallel-size") for c in CLAUSE.findall(text)
    )
