import asyncio

from quickstart import main


def test_quickstart_runs_and_returns_the_window() -> None:
    window = asyncio.run(main())
    assert [m.role for m in window] == ["system", "user"]
