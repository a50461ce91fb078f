"""``python -m chat.simulator [--host H] [--port P] [--prefix /v1]``: the standalone simulator.

Same as ``manage.py simulator`` but without Django settings.

May import: the standard library and this package.
"""

from __future__ import annotations

import argparse

from .server import serve


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m chat.simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100, help="0 picks a free port")
    parser.add_argument("--prefix", default="/v1", help="API mount point (default /v1)")
    parser.add_argument("--verbosity", type=int, default=1)
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.prefix, verbosity=args.verbosity)


if __name__ == "__main__":
    main()
