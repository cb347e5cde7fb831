"""`ReadingView` alone: the reading position is kept by name while rows arrive, grow or vanish (E1)."""

from __future__ import annotations

from mosaic.mediated_terminal.model import ReadingView, Row


def rows(*items: tuple[str, int]) -> list[Row]:
    """Rows of items given as (key, row count)."""
    return [Row(key, i, [("", f"{key}.{i}")]) for key, n in items for i in range(n)]


def shown(view: ReadingView, all_rows: list[Row], height: int) -> tuple[list[str], int | None]:
    start, below = view.window(all_rows, height)
    return [r.fragments[0][1] for r in all_rows[start:start + height]], below


def test_following_shows_the_end_and_new_rows_scroll_in() -> None:
    view = ReadingView()
    assert shown(view, rows(("a", 5), ("b", 5)), 4) == (["b.1", "b.2", "b.3", "b.4"], None)
    assert shown(view, rows(("a", 5), ("b", 6)), 4) == (["b.2", "b.3", "b.4", "b.5"], None)


def test_scrolled_up_rows_appended_or_growing_below_never_move_the_view_and_are_counted() -> None:
    view = ReadingView()
    before = rows(("a", 10), ("b", 2))
    view.page_up(before, 4)  # from the end (start 8) up a page of 2 rows
    assert shown(view, before, 4) == (["a.6", "a.7", "a.8", "a.9"], 0)
    grown = rows(("a", 10), ("b", 5), ("c", 2))  # b grew by 3, c is new
    assert shown(view, grown, 4) == (["a.6", "a.7", "a.8", "a.9"], 5)


def test_an_item_above_that_grows_does_not_move_what_is_read() -> None:
    view = ReadingView()
    before = rows(("a", 3), ("b", 10))
    view.page_up(before, 4)
    top = shown(view, before, 4)[0]
    assert top == ["b.4", "b.5", "b.6", "b.7"]
    assert shown(view, rows(("a", 7), ("b", 10)), 4)[0] == top  # anchored to b.4 by name, not by index


def test_an_anchored_item_that_leaves_keeps_the_index_and_page_down_to_the_end_follows_again() -> None:
    view = ReadingView()
    before = rows(("a", 10), ("b", 10))
    view.page_up(before, 4)
    view.page_up(before, 4)
    assert shown(view, before, 4)[0] == ["b.2", "b.3", "b.4", "b.5"]
    replaced = rows(("a", 10), ("h", 10))  # a re-read replaced b by a history item
    assert shown(view, replaced, 4)[0] == ["h.2", "h.3", "h.4", "h.5"]
    for _ in range(3):
        view.page_down(replaced, 4)
    assert view.following and shown(view, replaced, 4) == (["h.6", "h.7", "h.8", "h.9"], None)


def test_page_up_holds_at_the_top_and_holds_still_when_everything_fits() -> None:
    view = ReadingView()
    few = rows(("a", 2))
    view.page_up(few, 4)
    assert not view.following and shown(view, few, 4) == (["a.0", "a.1"], 0)
    more = rows(("a", 2), ("b", 5))
    assert shown(view, more, 4) == (["a.0", "a.1", "b.0", "b.1"], 3)
    for _ in range(5):
        view.page_up(more, 4)
    assert shown(view, more, 4)[0][0] == "a.0"
    empty = ReadingView()
    empty.page_up([], 4)
    assert empty.following
