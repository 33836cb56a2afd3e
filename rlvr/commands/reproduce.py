"""``rlvr reproduce``: list the declared experiments, or run one and write its results page."""

from __future__ import annotations

HELP = "Reproduce a paper's findings: a declared experiment with computed verdicts (list them without NAME)."
EPILOG = """examples:
  rlvr reproduce                              # the experiments, their cost and claims
  rlvr reproduce boundary --quick             # the miniature (minutes): checks the machinery
  rlvr reproduce boundary --seeds 3           # the full experiment; resumes from its cached cells
  rlvr reproduce boundary --part 1            # one part of a long experiment (parts share cells)
  rlvr reproduce boundary --max-minutes 30    # stop starting cells after 30 min; run again to continue
  rlvr reproduce scalerl --part 2 --jobs 2    # train two models at once (one process and core each)
  rlvr reproduce scalerl --part 9,18 --jobs 2 # two one-model parts side by side (also ranges: 4-6)
  rlvr reproduce boundary --publish           # also copy the page to docs/reproductions/boundary/
  rlvr reproduce scalerl --page-only --publish  # rewrite the page from the cells on disk, train nothing
                                                # (without --page-only or --part every remaining part runs first)
  rlvr reproduce scalerl --resume-published --part 6  # continue a run whose output folder is gone: first
                                                # put back the records published in docs/reproductions/scalerl/cells/
  rlvr reproduce wapo --rejudge-published     # a page published without its cells: its verdicts again under
                                                # the current rules, from its own table.json
output: OUT/README.md (verdict table first), OUT/table.json, OUT/plots/*.png, OUT/models/, OUT/evals/
        (default OUT: runs/reproduce/NAME, or NAME-quick with --quick); --publish also writes the
        records of the models and cells (no weights) to docs/reproductions/NAME/cells/
"""


def add_arguments(p) -> None:
    p.add_argument("name", nargs="?", help="experiment to run (omit to list them)")
    p.add_argument("--seeds", type=int, help="seeds of the seeded models (default: the experiment's)")
    p.add_argument("--quick", action="store_true", help="the miniature form: tiny model, few samples")
    p.add_argument("--out", help="output folder (default: runs/reproduce/NAME[-quick])")
    p.add_argument("--part", type=parse_parts, metavar="N[,M|N-M]",
                   help="run only this part (1-based) of an experiment declared in parts; several "
                        "(9,18 or 4-6) share the --jobs workers")
    p.add_argument("--max-minutes", type=float,
                   help="start no new cell after this many minutes; an RL run still training then "
                        "checkpoints and pauses (the same command resumes it)")
    p.add_argument("--jobs", type=int, default=1,
                   help="models trained at once, each in its own process with cores/jobs torch threads (default 1)")
    p.add_argument("--publish", action="store_true",
                   help="copy the page to docs/reproductions/NAME/ and rebuild docs/reproductions/README.md")
    p.add_argument("--page-only", action="store_true",
                   help="train and evaluate nothing: write the page from the cells already on disk "
                        "(a claim whose cells are not all on disk says 'not run yet')")
    p.add_argument("--status", action="store_true",
                   help="per part, how many of its cells OUT lacks (nothing trained or sampled): which part "
                        "to run next")
    p.add_argument("--resume-published", action="store_true",
                   help="first put the published records (docs/reproductions/NAME/cells/: finished models "
                        "without weights, evaluation cells) that OUT lacks into OUT, so they count as done")
    p.add_argument("--rejudge-published", action="store_true",
                   help="judge the published page again from its own table.json under the current rules (for a "
                        "page published without its cells): rewrites docs/reproductions/NAME/ and the index, "
                        "trains and evaluates nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--plain", action="store_true", help="plain progress lines and tables even on a terminal")


def parse_parts(text: str) -> tuple[int, ...]:
    """``--part``: "3", "9,18,27" or "4-6" (ranges inclusive, mixable: "1,4-6") -> (3,), (9, 18, 27), (4, 5, 6)."""
    import argparse

    parts: list[int] = []
    for piece in text.split(","):
        lo, dash, hi = piece.strip().partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if dash else [int(lo)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a part number, list or range: {text!r} "
                                             "(e.g. 3, 9,18 or 4-6)") from None
        if not span or min(span) < 1:
            raise argparse.ArgumentTypeError(f"parts are numbered from 1, low to high: {text!r}")
        parts += [p for p in span if p not in parts]
    return tuple(parts)


def list_experiments(plain: bool = False) -> None:
    """One row per declared experiment (its cost in minutes, full and ``--quick``, and its claims),
    and under it one row per ``--part``; minutes not yet measured by a full run read ``~N`` (estimated),
    and a part whose published legs (docs/reproductions/NAME/cells/legs.jsonl) finished it says what
    they measured and on which CPU."""
    from rlvr.console import print_table
    from rlvr.experiments.legs import LEGS, cpu_name, read_legs, rows_by_part
    from rlvr.experiments.reproduction import PUBLISHED
    from rlvr.experiments.spec import load, names

    rows = []
    for n in names():
        e = load(n)
        est = "~" if e.minutes_estimated else ""
        published = read_legs(PUBLISHED / n / "cells" / LEGS)
        took = rows_by_part(published, [p.minutes for p in e.parts])
        rows.append([n, f"{est}{e.minutes:.0f}" if e.minutes else "?", f"{e.quick.minutes:.0f}",
                     str(len(e.claims)), e.title])
        for i, part in enumerate(e.parts, 1):
            seeds = part.seeds
            which = f", seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}" if seeds else ""
            pre = part.pretrain_seeds
            which += (f", pretraining seed{'s' if len(pre) > 1 else ''} {', '.join(map(str, pre))}" if pre else "")
            notes = ["estimated"] if est else []
            g = took.get(str(i))
            if g and g["minutes"] is not None and g["last"] == "complete":  # its published legs
                where = cpu_name(g["machines"][0]) if len(g["machines"]) == 1 else f"{len(g['machines'])} machines"
                notes.append(f"measured {g['minutes']:.1f} on {where}")
            cost = (f"{est}{part.minutes:.0f} min" if part.minutes else "not measured yet") + (
                f" ({'; '.join(notes)})" if notes else "")
            rows.append([f"  --part {i}", "", "", "", f"{cost}, evaluations {', '.join(part.evaluations)}{which}"])
    print_table(["experiment", "full min", "quick min", "claims", "title"], rows, align="lrrrl", plain=plain)
    print("\nrun one: rlvr reproduce NAME [--quick] [--part N] [--seeds N] [--out DIR] [--max-minutes M] [--jobs J]")


def progress_lines(out) -> list[str]:
    """What ``--status`` says of the RL runs begun and not finished under ``out``: each one's step of
    its total, its last checkpoint and how long ago its log was written (over 5 minutes: not running
    now; the part's command resumes it)."""
    from rlvr.experiments.models import unfinished_runs

    lines = []
    for r in unfinished_runs(out):
        total = f" of {r['steps']:,}" if isinstance(r["steps"], int) else ""
        done = f" ({100 * r['step'] / r['steps']:.0f}%)" if isinstance(r["steps"], int) and r["step"] else ""
        ck = f"checkpoint {r['checkpoint']:,}" if r["checkpoint"] is not None else "no checkpoint yet"
        age = r["age_s"]
        when = f"{age:.0f} s" if age < 120 else f"{age / 60:.0f} min" if age < 7200 else f"{age / 3600:.1f} h"
        idle = "; not running now: the part's command resumes it" if age > 300 else ""
        lines.append(f"  {r['model']}: step {r['step'] or 0:,}{total}{done}, {ck}, log written {when} ago{idle}")
    return ["runs begun, not finished:", *lines] if lines else []


def print_status(exp, out, seeds: int, plain: bool = False) -> int:
    """The table of ``--status``: per part, the cells ``out`` lacks (and how many of them are stale: on
    disk under another key), the declared minutes and the minutes its recorded legs took
    (``out/legs.jsonl``; "-" where none finished); the next part to run skips the stale ones."""
    from rlvr.console import print_table
    from rlvr.experiments.legs import LEGS, read_legs, rows_by_part
    from rlvr.experiments.runner import part_status

    rows = part_status(exp, out, seeds)
    if not rows:
        print(f"{exp.name} declares no parts: `rlvr reproduce {exp.name} --page-only --out {out}` "
              "counts what is missing")
        return 0
    est = "~" if exp.minutes_estimated else ""
    took = rows_by_part(read_legs(out / LEGS), [r["minutes"] for r in rows])

    def measured(p: int) -> str:
        g = took.get(str(p))
        if not g or g["minutes"] is None:
            return "-"
        killed = f", {g['killed']} killed" if g["killed"] else ""
        return f"{g['minutes']:.1f} ({g['legs']} leg{'s' if g['legs'] > 1 else ''}{killed})"

    def state(r: dict) -> str:
        if not r["missing"]:
            return "done"
        return "stale" if r["stale"] == r["missing"] else "to run"

    print_table(["part", "cells missing", "state", "declared min", "measured min"],
                [[str(r["part"]), str(r["missing"]) + (f" ({r['stale']} stale)" if r["stale"] else ""), state(r),
                  f"{est}{r['minutes']:.0f}" if r["minutes"] else "?", measured(r["part"])] for r in rows],
                align="rrllr", plain=plain)
    left = [r for r in rows if r["missing"]]
    todo = [r for r in left if state(r) == "to run"]
    print(f"{len(rows) - len(left)} of {len(rows)} parts done in {out}"
          + (f"; next: --part {todo[0]['part']}" if todo else ""))
    for line in progress_lines(out):
        print(line)
    stale = [str(r["part"]) for r in left if state(r) == "stale"]
    if stale:
        print(f"stale: part(s) {', '.join(stale)} have every missing cell on disk under another key (computed "
              "under an older declaration or code); running them computes those cells again")
    return 0


def run(args) -> int:
    import sys
    from pathlib import Path

    from rlvr.errors import UserError

    if not args.name:
        list_experiments(args.plain)
        return 0
    if args.seeds is not None and args.seeds < 1:
        raise UserError(f"--seeds must be >= 1 (got {args.seeds})")
    if args.publish and args.quick:
        raise UserError("--publish copies a full run's page into docs/reproductions/; drop --quick")
    if args.max_minutes is not None and args.max_minutes <= 0:
        raise UserError(f"--max-minutes must be > 0 (got {args.max_minutes})")
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1 (got {args.jobs})")
    from rlvr.experiments.reproduction import PUBLISHED, reproduce
    from rlvr.experiments.spec import load

    exp = load(args.name)
    if args.rejudge_published:
        from rlvr.experiments.rejudge import rejudge_published

        print(f"published: {rejudge_published(exp, PUBLISHED)}")
        return 0
    if args.quick:
        exp = exp.quick_form()
    out = Path(args.out or f"runs/reproduce/{exp.name}{'-quick' if args.quick else ''}")
    if (args.page_only or args.status) and (args.part or args.max_minutes is not None):
        flag = "--page-only" if args.page_only else "--status"
        raise UserError(f"{flag} reads the cached cells of every part: drop --part and --max-minutes")
    if args.status:
        return print_status(exp, out, args.seeds or exp.seeds, args.plain)
    command = "rlvr reproduce " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["reproduce"] else [args.name])
    done = reproduce(exp, out, args.seeds or exp.seeds, command,
                     progress="none" if args.quiet else ("plain" if args.plain else "auto"),
                     max_minutes=args.max_minutes, part=args.part, jobs=args.jobs, page_only=args.page_only,
                     resume_published=args.resume_published, publish_page=args.publish)
    from rlvr.console import print_table

    print_table(["claim", "verdict"], [[r["id"], r["verdict"] + (" (post hoc)" if r.get("post_hoc") else "")]
                                       for r in done.rows], align="ll", plain=args.plain)
    print(f"page: {done.page}")
    if done.index is not None:
        print(f"published: {done.index}")
    return 0
