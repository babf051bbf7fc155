"""Tables drawn to a view's width: a screen built ahead (before it has a size) draws them again
once laid out, so a table that fits is not scrolled sideways."""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CUDA_AUTOTUNE = FIXTURES / "cuda_mlp_autotune"


async def test_a_prebuilt_autotune_screen_draws_its_table_to_its_view(open_ui) -> None:
    from tuidebug.tui.screens.autotune import AutotuneScreen

    async with open_ui(CUDA_AUTOTUNE, prebuild=True) as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.prebuilder._timer is None, 120, poll=0.05), \
            f"screens still being built: {app.prebuilder.built}"
        assert "autotune" in app.prebuilder.built, "built ahead, its entries drawn unseen"
        await ui.press("5")
        screen = app.screen
        assert isinstance(screen, AutotuneScreen) and screen.entries, "tuned ops shown"
        view = screen.query_one("#choices-view")
        widths = [cell_len(view.source.plain(i)) for i in range(view.line_count)]
        assert widths, "the choices table has lines"
        room = view.scrollable_content_region.width
        assert max(widths) <= room, (max(widths), room, ui.layout())
        assert not view.show_horizontal_scrollbar, "a table that fits scrolls nothing sideways"
