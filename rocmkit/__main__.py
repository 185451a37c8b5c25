"""The `rocmkit` command's entry: `python -m rocmkit` and the `rocmkit` script (pyproject's [project.scripts])."""

import gc


def main() -> None:
    # Before the CLI's imports: they create tens of thousands of objects that live as long as the process, and
    # at the default threshold (700) the collector walks them about 20 times during `doctor --root`, 4 % of its
    # run (benchmarks/doctor_speed.py). At 50,000 no collection happens in a doctor run, and a long command
    # (certify, build) still collects its cycles every 50,000 net allocations.
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
