"""A refused request under torchrun: rank 0 prints it once, and the other ranks wait for that before they exit (an
earlier exit makes torchrun's agent terminate rank 0 before it has printed; CI lost the message that way)."""

from __future__ import annotations

import datetime
import threading
import time

import torch.distributed as dist

from ltx2_core.parallel import launch


def _store_env(monkeypatch, rank: int):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "RANK": str(rank),
                       "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    return store


def test_another_rank_waits_until_rank_zero_has_reported(monkeypatch, capsys):
    store = _store_env(monkeypatch, rank=1)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (launch.report_refusal("error: x", wait_s=20), done.set()))
    worker.start()
    time.sleep(1.0)  # rank 0 is slow to print (a busy machine)
    assert not done.is_set()  # still waiting for rank 0
    store.set(launch.REPORTED, "1")
    worker.join(10)
    assert done.is_set()
    assert capsys.readouterr().err == ""  # not rank 0: says nothing


def test_rank_zero_prints_once_and_tells_the_others(monkeypatch, capsys):
    store = _store_env(monkeypatch, rank=0)
    launch.report_refusal("error: bad layout")
    assert capsys.readouterr().err == "error: bad layout\n"
    store.wait([launch.REPORTED], datetime.timedelta(seconds=1))  # raises if rank 0 did not tell


def test_another_rank_gives_up_waiting_when_rank_zero_never_reports(monkeypatch):
    _store_env(monkeypatch, rank=1)
    started = time.monotonic()
    launch.report_refusal("error: x", wait_s=1)
    assert time.monotonic() - started < 10


def test_without_torchrun_it_just_prints(monkeypatch, capsys):
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    launch.report_refusal("error: y")
    assert capsys.readouterr().err == "error: y\n"
