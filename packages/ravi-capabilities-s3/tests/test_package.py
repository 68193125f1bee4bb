from importlib.metadata import distribution

from ravi.kernel.registry import GROUPS


def test_imports_and_registers_nothing_it_does_not_implement() -> None:
    import ravi.capabilities.s3 as package

    assert package.__all__ == []
    eps = distribution("ravi-capabilities-s3").entry_points
    assert [ep for ep in eps if ep.group in GROUPS.values()] == []
