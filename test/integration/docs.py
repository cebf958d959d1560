#!/usr/bin/python3
"""Run the SQL examples of the documentation and compare their output.

Usage: docs.py [--update] FILE.md...   (PGHOST/PGPORT/PGUSER: a superuser)

Conventions (doc/tests.md, "The documentation's examples"):
  - every ```sql block runs, in the order of its file, each block in a psql
    session of its own, in a database made for the file (with the extension
    created, unless a block of the file creates it);
  - a ```text block that follows a ```sql block (blank lines between at
    most) is what psql prints for it, command tags and errors included: it
    is compared, trailing white space aside; a ```sql block with no output
    shown must run without an error;
  - ```sql nocheck marks a block that cannot run on a test server (a Citus
    cluster, another server's files); keep them few: they are listed;
  - a synopsis (a function's signature, not a statement) is a plain ```
    block, not ```sql;
  - every ```python block must be a part, verbatim, of a file under
    examples/python/, every ```js block of one under examples/node/: those
    files run as programs (test/integration/docs.sh), so the quoted code runs;
  - a ```sh block that is one command running an example program
    (python3 examples/..., node examples/...) followed by a ```text block:
    the program's output, compared with what it printed when docs.sh ran
    it (DOCS_PROGRAM_OUTPUT: a folder of PATH.out files);
  - a ```sql fence must start its line (an indented one would escape this
    check, and is refused).
With --update, the shown outputs are rewritten with what psql printed (then
read the diff: the docs must still say what the text around them says).
Roles the blocks create are dropped after each file.
"""
import os
import re
import subprocess
import sys

update = False
args = sys.argv[1:]
if args and args[0] == "--update":
    update = True
    args = args[1:]

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^```(.*)$")


def blocks_of(lines):
    """The fenced blocks of a file: (lang, info, first content line index,
    end fence line index).  Fails on an indented ```sql fence."""
    out = []
    i = 0
    while i < len(lines):
        if re.match(r"^\s+```\s*sql", lines[i]):
            raise SystemExit(f"line {i + 1}: an indented ```sql fence")
        m = FENCE.match(lines[i])
        if m:
            info = m.group(1).strip()
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            if j == len(lines):
                raise SystemExit(f"line {i + 1}: a fence never closed")
            lang = info.split()[0] if info else ""
            out.append((lang, info, i + 1, j))
            i = j + 1
        else:
            i += 1
    return out


def psql(db, sql, stop_on_error):
    cmd = ["psql", "-X", "-d", db]
    if stop_on_error:
        cmd += ["-v", "ON_ERROR_STOP=1"]
    p = subprocess.run(cmd, input=sql, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout


def admin(sql, db="postgres"):
    rc, out = psql(db, sql, True)
    if rc != 0:
        raise SystemExit(f"set-up failed: {sql}\n{out}")
    return out


def normal(text):
    lines = [l.rstrip() for l in text.split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    while lines and lines[0] == "":
        lines.pop(0)
    return lines


def roles():
    p = subprocess.run(["psql", "-X", "-At", "-d", "postgres", "-c", "SELECT rolname FROM pg_roles"],
                       stdout=subprocess.PIPE, text=True, check=True)
    return set(p.stdout.split())


def quoted_code(path, lines, blocks, failures):
    """Every ```python / ```js block must be a part of an examples/ file."""
    where = {"python": ("examples/python", ".py"), "js": ("examples/node", ".js")}
    for lang, info, start, end in blocks:
        if lang not in where:
            continue
        folder, ext = where[lang]
        code = "\n".join(lines[start:end])
        found = False
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            if "node_modules" in dirpath:
                continue
            for f in files:
                if f.endswith(ext):
                    with open(os.path.join(dirpath, f)) as fh:
                        if code in fh.read():
                            found = True
        if not found:
            failures.append(f"{path}:{start}: this ```{lang} block is not a part of any "
                            f"{folder}/*{ext} file (the files run; the quote must be theirs)")
    return failures


def followed_by_text(k, blocks, lines):
    """The ```text block right after block k, as (start, end), or None."""
    if k + 1 < len(blocks):
        nlang, _, nstart, nend = blocks[k + 1]
        end = blocks[k][3]
        if nlang == "text" and all(l.strip() == "" for l in lines[end + 1:nstart - 1]):
            return (nstart, nend)
    return None


def programs(path, lines, blocks):
    """```sh blocks running an example program, and the output they show."""
    global total_programs
    folder = os.environ.get("DOCS_PROGRAM_OUTPUT")
    for k, (lang, info, start, end) in enumerate(blocks):
        m = re.fullmatch(r"(?:python3|node) (examples/\S+)", "\n".join(lines[start:end]).strip())
        if lang != "sh" or not m:
            continue
        expect = followed_by_text(k, blocks, lines)
        if expect is None:
            continue
        if not folder:
            failures.append(f"{path}:{start}: no output of {m.group(1)} to compare (DOCS_PROGRAM_OUTPUT)")
            continue
        try:
            with open(os.path.join(folder, m.group(1) + ".out")) as fh:
                got = normal(fh.read())
        except OSError:
            failures.append(f"{path}:{start}: {m.group(1)} was not run by docs.sh")
            continue
        total_programs += 1
        want = normal("\n".join(lines[expect[0]:expect[1]]))
        if want != got:
            failures.append(f"{path}:{start}: {m.group(1)} printed otherwise:\n--- shown\n"
                            + "\n".join(want) + "\n+++ printed\n" + "\n".join(got))


total_run = total_compared = total_programs = 0
failures = []
nocheck = []
for path in args:
    with open(path) as fh:
        text = fh.read()
    lines = text.split("\n")
    blocks = blocks_of(lines)
    quoted_code(path, lines, blocks, failures)
    programs(path, lines, blocks)
    sql = [(k, b) for k, b in enumerate(blocks) if b[0] == "sql"]
    if not sql:
        continue
    db = "docs_" + re.sub(r"\W", "_", os.path.basename(path).lower())
    admin(f"DROP DATABASE IF EXISTS {db}")
    admin(f"CREATE DATABASE {db}")
    before = roles()
    if not any(re.search(r"CREATE EXTENSION (IF NOT EXISTS )?dedup\b", "\n".join(lines[s:e]), re.I)
               for _, (_, _, s, e) in sql):
        admin("CREATE EXTENSION dedup", db)
    edits = []
    for k, (lang, info, start, end) in sql:
        if "nocheck" in info.split()[1:]:
            nocheck.append(f"{path}:{start}")
            continue
        expect = followed_by_text(k, blocks, lines)
        code = "\n".join(lines[start:end]) + "\n"
        rc, out = psql(db, code, expect is None)
        total_run += 1
        if expect is None:
            if rc != 0:
                failures.append(f"{path}:{start}: the block failed:\n{out}")
            continue
        total_compared += 1
        want = normal("\n".join(lines[expect[0]:expect[1]]))
        got = normal(out)
        if want != got:
            if update:
                edits.append((expect, got))
            else:
                failures.append(f"{path}:{start}: the output shown differs from psql's:\n"
                                + "--- shown\n" + "\n".join(want) + "\n+++ psql\n" + "\n".join(got))
    admin(f"DROP DATABASE {db}")
    for r in sorted(roles() - before):
        admin(f'DROP ROLE "{r}"')
    if edits:
        for (s, e), got in sorted(edits, reverse=True):
            lines[s:e] = got
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        print(f"{path}: {len(edits)} outputs rewritten")

for f in failures:
    print("FAIL: " + f)
print(f"docs: {total_run} SQL blocks run, {total_compared} outputs compared, "
      f"{total_programs} program outputs compared, "
      f"{len(nocheck)} not run (nocheck: {', '.join(nocheck) or 'none'})")
sys.exit(1 if failures else 0)
