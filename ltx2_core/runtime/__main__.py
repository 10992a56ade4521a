"""A worker launched by torchrun that attaches to a controller (ComfyUI's loader with a worker address, or any
`Controller(..., attach="HOST:PORT")`):

    LTX2_WORKERS_KEY=secret torchrun --nproc-per-node 2 -m ltx2_core.runtime --connect 127.0.0.1:29600

See `ltx2_core.runtime.links` and the README's multi-GPU section (several machines: torchrun's --nnodes,
--node-rank and --master-addr)."""

from __future__ import annotations

import argparse
import sys

from ltx2_core.runtime.links import CONNECT_TIMEOUT, LinkError, attach


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltx2_core.runtime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", required=True, metavar="HOST:PORT", help="the controller's worker address")
    parser.add_argument("--timeout", type=float, default=CONNECT_TIMEOUT,
                        help="seconds to keep trying to reach the controller (default %(default)g)")
    args = parser.parse_args(argv)
    try:
        attach(args.connect, args.timeout)
    except LinkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
