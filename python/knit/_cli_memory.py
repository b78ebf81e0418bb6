"""`knit memory FILE::KERNEL`: where each SBUF / PSUM tensor is placed over its live range (a
table, and with --svg / --png the picture); at a capacity error, the same at the failing point
(docs/profiling.md, "Memory map")."""
import sys

from .errors import NkiValidationError


def add_options(parser):
    parser.add_argument("--svg", metavar="OUT.svg", help="write the picture as a self-contained SVG")
    parser.add_argument("--png", metavar="OUT.png", help="write the picture as a PNG (needs matplotlib)")


def cmd_memory(job, args, report):
    """Prints the memory map's table and writes the pictures asked for; exit status 1 (after
    printing the error, the table and the pictures) when the kernel does not fit. `report` gets
    the --json document's fields: the map, whether the kernel fits (with the capacity error's
    message when not) and the files written."""
    status, capacity_error = 0, None
    try:
        compiled, _ = job.compile(job.placeholders())
        memory = compiled.memory_map()
    except NkiValidationError as e:
        if e.memory_map is None:
            raise
        print(str(e), file=sys.stderr)
        memory, status, capacity_error = e.memory_map, 1, str(e)
    print(memory.text())
    written = []
    for path, save in ((args.svg, memory.save_svg), (args.png, memory.save_png)):
        if path:
            written.append(str(save(path)))
            print(f"memory map written to {written[-1]}")
    report.update(fits=capacity_error is None, capacity_error=capacity_error, memory_map=memory.to_json(),
                  written=written)
    return status
