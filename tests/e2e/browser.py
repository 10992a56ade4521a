"""The pack's workflows in ComfyUI's real frontend, in headless Chromium (run with ComfyUI's Python, which has
playwright; Debian's /usr/bin/chromium). Only loopback requests are allowed.

    python browser.py SERVER check UI.json ...         # load each UI workflow; print what the frontend makes of it
    python browser.py SERVER to-ui API.json OUT.json   # load an API workflow and save the frontend's UI workflow
    python browser.py SERVER widget [DEVICES.json]     # the layout node's widget: its choices and the queued value
    python browser.py SERVER inputs UI.json ...        # the widgets each workflow's nodes grey (do not apply)

`check` prints one JSON object per file: the API prompt the frontend builds from the loaded graph
(`graphToPrompt`), the node types it does not know, and the console errors and page errors seen while loading.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlparse

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# ready: the app is mounted, its canvas exists and the pack's node definitions are registered (a fresh server may
# start on an empty graph: its first visit opens the template browser instead of the default workflow)
READY = """() => { const app = window.comfyAPI?.app?.app;
  return !!(app?.vueAppReady && app.canvas && window.LiteGraph?.registered_node_types?.LTX2Sampler); }"""
# the start-up workflow may still be loading after the app is ready and would replace ours: load until it stays
LOAD = """async (app, workflow) => {
  const wanted = workflow.nodes.map(n => n.type).sort().join();
  for (let attempt = 0; attempt < 10; attempt++) {
    await app.loadGraphData(workflow);
    await new Promise(r => setTimeout(r, 500));
    if (app.graph.nodes.map(n => n.type).sort().join() === wanted) return;
  }
  throw new Error("the workflow did not stay loaded");
}"""
CHECK = """async (workflow) => {
  const app = window.comfyAPI.app.app;
  await (""" + LOAD + """)(app, workflow);
  const known = new Set(Object.keys(await (await fetch("/object_info")).json()));
  const missing = app.graph.nodes.map(n => n.type).filter(t => !known.has(t));
  const prompt = (await app.graphToPrompt()).output;
  const images = {};  // each LoadImage node's picture: its width once loaded (0: an empty box)
  for (const node of app.graph.nodes.filter(n => n.type === "LoadImage")) {
    for (let i = 0; i < 100 && !(node.imgs?.[0]?.complete && node.imgs[0].naturalWidth); i++)
      await new Promise(r => setTimeout(r, 100));
    images[node.id] = node.imgs?.[0]?.naturalWidth ?? 0;
  }
  return {missing, prompt, images};
}"""
# the layout node with its widget, the given GPUs answered for /ltx2/devices (null: the server's own answer): the
# choices before and after picking sp = 2, whether the information rows can be edited, and the prompt then built
WIDGET = """async (gpus) => {
  const app = window.comfyAPI.app.app, api = window.comfyAPI.api.api, real = api.fetchApi.bind(api);
  if (gpus) api.fetchApi = async (route, options) => route === "/ltx2/devices"
    ? new Response(JSON.stringify({devices: gpus})) : real(route, options);
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let node;
  for (let attempt = 0; attempt < 10; attempt++) {  // the start-up workflow may still replace the graph
    app.graph.clear();
    node = window.LiteGraph.createNode("LTX2ParallelConfig");
    app.graph.add(node);
    await sleep(500);
    if (app.graph.nodes.length === 1 && app.graph.nodes[0] === node) break;
  }
  const widget = (name) => node.widgets.find((w) => w.name === name);
  for (let i = 0; i < 100 && !widget("sp_degree"); i++) await sleep(50);
  const values = (name) => [...widget(name).options.values];
  const before = {sp: values("sp_degree"), tp: values("tp_degree"), cfg: values("cfg_degree"),
    devices: widget("devices_found").value};
  widget("sp_degree").callback("2");
  const after = {tp: values("tp_degree"), layout: widget("layout").value, memory: widget("weights").value,
    label: widget("weights").label, predicted: widget("predicted_end_to_end").value,
    layouts: [...widget("layouts_by_time").value]};
  const info = ["devices_found", "weights", "predicted_end_to_end", "layouts_by_time"].map((name) => widget(name));
  const readOnly = info.every((w) => w.type !== "text" && w.options?.read_only === true && !w.onClick && !w.mouse);
  const prompt = (await app.graphToPrompt()).output;
  widget("default layout").callback();
  return {before, after, readOnly, prompt, defaulted: widget("layout").value};
}"""
# the widgets each node of a loaded workflow greys, then the generate node's after switching its mode to distilled,
# and the prompt then queued (greyed widgets are still queued)
INPUTS = """async (workflow) => {
  const app = window.comfyAPI.app.app;
  await (""" + LOAD + """)(app, workflow);
  const greyed = () => Object.fromEntries(app.graph.nodes.filter((n) => n.widgets?.length)
    .map((n) => [n.type, n.widgets.filter((w) => w.disabled).map((w) => w.name).sort()]));
  const before = greyed();
  const generate = app.graph.nodes.find((n) => n.type === "LTX2Generate");
  let after = null;
  if (generate) {
    const mode = generate.widgets.find((w) => w.name === "mode");
    mode.value = "distilled";
    mode.callback("distilled");
    after = greyed();
  }
  return {before, after, prompt: (await app.graphToPrompt()).output};
}"""
TO_UI = """async (api) => {
  const app = window.comfyAPI.app.app;
  await app.loadApiJson(api, "converted");
  app.graph.arrange?.(80);  // columns by dependency instead of nodes stacked at the origin
  return app.graph.serialize();
}"""


def _page(browser, server: str, errors: list[str]):
    page = browser.new_page()
    page.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).hostname in
               ("127.0.0.1", "localhost") else route.abort())
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)
    page.goto(server)
    page.wait_for_function(READY, timeout=60_000)
    page.keyboard.press("Escape")  # a fresh profile opens the templates dialog first
    return page


def main(server: str, mode: str, paths: list[str]) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            if mode == "widget":
                errors = []
                page = _page(browser, server, errors)
                gpus = json.loads(Path(paths[0]).read_text()) if paths else None
                print(json.dumps({**page.evaluate(WIDGET, gpus), "errors": errors}), flush=True)
                return
            if mode == "inputs":
                for path in paths:
                    errors = []
                    page = _page(browser, server, errors)
                    result = page.evaluate(INPUTS, json.loads(Path(path).read_text()))
                    print(json.dumps({"file": path, **result, "errors": errors}), flush=True)
                    page.close()
                return
            if mode == "to-ui":
                errors: list[str] = []
                page = _page(browser, server, errors)
                source, target = paths
                Path(target).write_text(json.dumps(page.evaluate(TO_UI, json.loads(Path(source).read_text())),
                                                   indent=1) + "\n")
                return
            for path in paths:
                errors = []
                page = _page(browser, server, errors)
                seen_before = len(errors)
                result = page.evaluate(CHECK, json.loads(Path(path).read_text()))
                print(json.dumps({"file": path, **result, "errors": errors[seen_before:],
                                  "startup_errors": errors[:seen_before]}), flush=True)
                page.close()
        finally:
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
