"""``neuronsim presets``: the hardware presets and every parameter with its value and source."""

from __future__ import annotations

import json

from neuronsim.cli import presets
from neuronsim.cli.formatting import table

EXAMPLES = """\
commands:
  list    the built-in presets: name, NeuronCore generation, instance type, description
  show    every parameter of one preset with its value, source and confidence

examples:
  neuronsim presets list
  neuronsim presets show trn2
  neuronsim presets show my_preset.json --json"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "presets",
        help="list presets, show every parameter of one",
        description=__doc__.split("``: ")[1],
        epilog=EXAMPLES,
    )
    psub = p.add_subparsers(dest="presets_command", metavar="{list,show}")
    psub.required = True
    lst = psub.add_parser(
        "list",
        help="the built-in presets",
        description="The built-in presets: name, generation, instance type, description.",
    )
    lst.set_defaults(func=run_list)
    show = psub.add_parser(
        "show",
        help="every parameter with its value and source",
        description="Every parameter of a preset with its value, source and confidence.",
        epilog="example: neuronsim presets show trn1",
    )
    show.add_argument("preset", help=f"{', '.join(presets.builtin_names())} or a preset JSON file")
    show.add_argument(
        "--json", action="store_true", help="print {key: {value, source, ...}} as JSON"
    )
    show.set_defaults(func=run_show)


def run_list(args) -> int:
    rows = []
    for name in presets.builtin_names():
        tree = presets.load(name)
        info = presets.info(tree)
        instance = (tree.get("instance") or {}).get("name", {}).get("value", "")
        rows.append((name, info.get("generation", ""), instance, info.get("description", "")))
    print(table(("preset", "generation", "instance", "description"), rows, (False,) * 4))
    return 0


def run_show(args) -> int:
    tree = presets.load(args.preset)
    params = presets.parameters(tree)
    if args.json:
        print(json.dumps(dict(params), indent=1))
        return 0
    info = presets.info(tree)
    print(
        f"{info.get('name', args.preset)}: {info.get('description', '')} "
        f"({info.get('generation', '')})"
    )
    print(f"confidence: {info.get('confidence', '-')}\n")
    width = max(len(f"{k} = {json.dumps(p['value'])}") for k, p in params)
    for k, p in params:
        head = f"{k} = {json.dumps(p['value'])}"
        conf = f"[{p['confidence']}]" if p.get("confidence") else ""
        print(f"{head.ljust(width)}  {conf}\n    source: {p.get('source', '-')}")
        if p.get("note"):
            print(f"    note: {p['note']}")
    return 0
