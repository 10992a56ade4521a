"""Runs an API-format workflow on a ComfyUI server, headless: posts it, follows the websocket (printing progress),
downloads the outputs. Exit status: 0 done, 1 execution error, 2 validation error or bad arguments, 3 interrupted,
4 timed out, 5 server unreachable (nothing answers at --server).

    python tools/ltx2_client.py example_workflows/api/ltx2_t2v_one_stage.api.json --prompt "A red car at night." \
        --seed 7 --set ckpt_name=ltx-2.3-22b-dev.safetensors --set 4.frames=97 --out outputs/

`--set [NODE.]INPUT=VALUE` sets one input of one node, or of every node where that input is a value rather than a
link (VALUE is read as JSON when it parses, else as text); `--prompt` and `--seed` set those inputs on every node
that has them.
Needs `websocket-client` (in requirements.txt).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import websocket

DONE, FAILED, INVALID, INTERRUPTED, TIMED_OUT, UNREACHABLE = 0, 1, 2, 3, 4, 5


class ClientError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def load_workflow(path: str) -> dict:
    workflow = json.loads(Path(path).read_text())
    if "nodes" in workflow and "links" in workflow:
        raise ClientError(INVALID, f"{path} is a UI-format workflow; in ComfyUI use Workflow > Export (API) and "
                                   "pass that file")
    return workflow


def apply_overrides(workflow: dict, settings: list[str]) -> None:
    """`[NODE.]INPUT=VALUE` each; ClientError when nothing has that input."""
    for setting in settings:
        target, sep, raw = setting.partition("=")
        if not sep:
            raise ClientError(INVALID, f"--set {setting!r}: use [NODE.]INPUT=VALUE")
        node_id, _, name = target.rpartition(".")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if node_id:
            nodes = [workflow[node_id]] if node_id in workflow else []
        else:
            # by name alone: every node where the input is a value (a link of the same name stays a link)
            nodes = [node for node in workflow.values() if not isinstance(node["inputs"].get(name, []), list)]
        if not nodes:
            raise ClientError(INVALID, f"--set {setting!r}: no node {'%s ' % node_id if node_id else ''}has an "
                                       f"input {name!r}")
        for node in nodes:
            node["inputs"][name] = value


def submit(server: str, workflow: dict, client_id: str) -> str:
    body = json.dumps({"prompt": workflow, "client_id": client_id}).encode()
    request = urllib.request.Request(f"{server}/prompt", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["prompt_id"]
    except urllib.error.HTTPError as exc:
        raise ClientError(INVALID, "the server refused the workflow:\n" + validation_report(json.load(exc)))
    except OSError as exc:
        raise unreachable(server, exc)


def unreachable(server: str, exc: Exception) -> ClientError:
    return ClientError(UNREACHABLE, f"cannot reach ComfyUI at {server} ({exc}); start it, or pass --server")


def validation_report(answer: dict) -> str:
    """One line per node error of a 400 answer (ComfyUI's `node_errors`), after the overall message."""
    error = answer.get("error", {})
    lines = [f"{error.get('message', 'invalid workflow')}: {error.get('details', '')}".rstrip(": ")]
    for node_id, node in answer.get("node_errors", {}).items():
        for item in node.get("errors", []):
            lines.append(f"  node {node_id} ({node.get('class_type')}): {item.get('message')}: {item.get('details')}")
    return "\n".join(lines)


def follow(ws: websocket.WebSocket, prompt_id: str, timeout: float) -> int:
    """Prints progress until the prompt ends and returns how many preview images came; ClientError for an error,
    an interrupt or the timeout."""
    deadline, previews = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        ws.settimeout(max(deadline - time.monotonic(), 0.1))
        try:
            frame = ws.recv()
        except websocket.WebSocketTimeoutException:
            break
        if not isinstance(frame, str):
            previews += 1  # a binary frame: a preview image
            continue
        message = json.loads(frame)
        kind, data = message.get("type"), message.get("data", {})
        if data.get("prompt_id") not in (None, prompt_id):
            continue
        if kind == "progress":
            print(f"node {data['node']}: step {data['value']}/{data['max']}", flush=True)
        elif kind == "executing" and data.get("node"):
            print(f"running node {data['node']}", flush=True)
        elif kind == "execution_error":
            raise ClientError(FAILED, f"node {data.get('node_id')} ({data.get('node_type')}) failed: "
                                      f"{data.get('exception_type')}: {data.get('exception_message', '').strip()}")
        elif kind == "execution_interrupted":
            raise ClientError(INTERRUPTED, f"interrupted at node {data.get('node_id')} ({data.get('node_type')})")
        elif kind == "execution_success":
            return previews
    raise ClientError(TIMED_OUT, f"no result within {timeout:g} s")


def download(server: str, prompt_id: str, out: Path) -> list[Path]:
    """Every file the prompt's output nodes saved, into `out`."""
    deadline = time.monotonic() + 30
    while True:  # the history entry is written just after `execution_success` is sent
        with urllib.request.urlopen(f"{server}/history/{prompt_id}", timeout=30) as response:
            history = json.load(response)
        if prompt_id in history or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if prompt_id not in history:
        raise ClientError(FAILED, f"the prompt finished but the server has no history of {prompt_id}")
    outputs = history[prompt_id]["outputs"]
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for node_output in outputs.values():
        for items in node_output.values():
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and "filename" in item:
                    query = urllib.parse.urlencode({k: item.get(k, "") for k in ("filename", "subfolder", "type")})
                    target = out / item["filename"]
                    with urllib.request.urlopen(f"{server}/view?{query}", timeout=60) as response:
                        target.write_bytes(response.read())
                    saved.append(target)
    return saved


def run(args: argparse.Namespace) -> list[Path]:
    workflow = load_workflow(args.workflow)
    settings = list(args.set)
    settings += [f"prompt={json.dumps(args.prompt)}"] if args.prompt is not None else []
    settings += [f"seed={args.seed}"] if args.seed is not None else []
    apply_overrides(workflow, settings)
    server, client_id = args.server.rstrip("/"), uuid.uuid4().hex
    try:
        ws = websocket.create_connection(f"ws{server[4:]}/ws?clientId={client_id}", timeout=30)
    except (OSError, websocket.WebSocketException) as exc:
        raise unreachable(server, exc)
    try:
        prompt_id = submit(server, workflow, client_id)
        print(f"queued prompt {prompt_id}", flush=True)
        previews = follow(ws, prompt_id, args.timeout)
        print(f"done; {previews} preview images", flush=True)
    finally:
        ws.close()
    return download(server, prompt_id, Path(args.out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workflow", help="an API-format workflow (.api.json)")
    p.add_argument("--server", default="http://127.0.0.1:8188")
    p.add_argument("--prompt", help="the prompt of every text-encode / generate node")
    p.add_argument("--seed", type=int, help="the seed of every sampler / generate node")
    p.add_argument("--set", action="append", default=[], metavar="[NODE.]INPUT=VALUE", help="set an input")
    p.add_argument("--out", default="outputs", help="folder for the downloaded outputs")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the result")
    args = p.parse_args(argv)
    try:
        for path in run(args):
            print(f"saved {path}")
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except (OSError, websocket.WebSocketException) as exc:
        print(f"error: the run on ComfyUI at {args.server} failed ({exc})", file=sys.stderr)
        return FAILED
    return DONE


if __name__ == "__main__":
    sys.exit(main())
