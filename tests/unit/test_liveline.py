"""The live status line (run/liveline.py): at most one update a second, erased without a trace,
and given up once the output is no terminal."""

from __future__ import annotations

from pytest_atlante.run.liveline import LiveLine, status


def shown_after(writes: list[str]) -> str:
    """What a terminal shows once the writes' backspaces moved the cursor back over them."""
    cells: list[str] = []
    cursor = 0
    for text in writes:
        for ch in text:
            if ch == "\b":
                cursor -= 1
            else:
                cells[cursor:cursor + 1] = [ch]
                cursor += 1
    return "".join(cells).rstrip()


def test_updates_at_most_once_a_second_and_erase_to_nothing() -> None:
    now = [100.0]
    writes: list[str] = []
    line = LiveLine(lambda text: writes.append(text) or True, clock=lambda: now[0])
    turns = [0]
    line._turns, line._started = (lambda: turns[0]), 100.0  # as start() sets them, without its thread
    assert line.tick() and shown_after(writes) == " 0s, 0 turns"
    now[0], turns[0] = 100.5, 1
    assert line.tick() and len(writes) == 1          # half a second later: nothing drawn
    now[0] = 112.0
    assert line.tick() and shown_after(writes) == " 12s, 1 turn"
    line.stop()
    assert shown_after(writes) == "" and not line.tick()


def test_gives_up_when_the_output_is_no_terminal() -> None:
    writes: list[str] = []
    line = LiveLine(lambda text: writes.append(text) and False, clock=lambda: 5.0)
    assert line.tick() is False
    line.stop()
    assert writes == [" 5s"]  # one attempt, nothing to erase


def test_status_text() -> None:
    assert status(3.4, None) == " 3s" and status(61, 2) == " 61s, 2 turns"
    assert status(12, None, "4 in flight, 9 of 32 done") == " 12s; 4 in flight, 9 of 32 done"


def test_trials_in_flight_show_how_the_others_fare() -> None:
    writes: list[str] = []
    line = LiveLine(lambda text: writes.append(text) or True, clock=lambda: 7.0)
    line._detail, line._started = (lambda: "3 in flight, 1 of 8 done"), 0.0  # as start(detail=...) sets them
    assert line.tick() and shown_after(writes) == " 7s; 3 in flight, 1 of 8 done"
